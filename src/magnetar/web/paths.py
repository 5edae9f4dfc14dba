"""Path helpers shared by the resource modules.

Theory of operation: Pulsar's REST paths carry a topic as separate segments
(domain, tenant, namespace, percent-encoded local name); Starlette has already
decoded the segments once, which is the one decoding Pulsar performs.  We only
reassemble the canonical ``domain://tenant/namespace/local`` string the service
layer takes and refuse a domain Pulsar does not know.
"""

from __future__ import annotations

from magnetar.web.errors import WebError

DOMAINS = ("persistent", "non-persistent")


def topic_name(domain: str, tenant: str, namespace: str, topic: str) -> str:
    if domain not in DOMAINS:
        raise WebError(412, f"Invalid topic domain: {domain!r}")
    if not topic:
        raise WebError(412, "Invalid topic name: empty local name")
    return f"{domain}://{tenant}/{namespace}/{topic}"


def namespace_name(tenant: str, namespace: str) -> str:
    return f"{tenant}/{namespace}"
