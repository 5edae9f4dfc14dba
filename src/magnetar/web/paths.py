"""Path helpers shared by the resource modules.

Theory of operation: Pulsar's REST paths carry a topic as separate segments
(domain, tenant, namespace, percent-encoded local name); Starlette has already
decoded the segments once, which is the one decoding Pulsar performs.  We only
reassemble the canonical ``domain://tenant/namespace/local`` string the service
layer takes and refuse a domain Pulsar does not know.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from magnetar.web.errors import WebError

NAME_RE = re.compile(r"^[-=:.\w]+$")
STRICT_PARAMS = ("tenant", "namespace", "cluster")
SEGMENT_LEN_MAX = 1024


def check_path_names(params: Mapping[str, Any]) -> None:
    """Pulsar's name rule for tenants/namespaces/clusters (412), and no control characters or
    over-long segments in any other path parameter (every route's: ``deps.validate_path_names``)."""
    for key, value in params.items():
        if not isinstance(value, str):
            continue
        if key in STRICT_PARAMS and (not NAME_RE.match(value) or value in (".", "..")):
            raise WebError(412, f"{key.capitalize()} name is not valid: {value!r}")
        if len(value) > SEGMENT_LEN_MAX or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise WebError(412, f"Invalid {key}: {value[:64]!r}")


DOMAINS = ("persistent", "non-persistent")


def topic_name(domain: str, tenant: str, namespace: str, topic: str) -> str:
    if domain not in DOMAINS:
        raise WebError(412, f"Invalid topic domain: {domain!r}")
    if not topic:
        raise WebError(412, "Invalid topic name: empty local name")
    return f"{domain}://{tenant}/{namespace}/{topic}"


def namespace_name(tenant: str, namespace: str) -> str:
    return f"{tenant}/{namespace}"
