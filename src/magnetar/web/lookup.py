"""HTTP topic lookup: ``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}``.

Theory of operation: clients with an ``http://`` service URL ask here which
broker serves a topic and then speak the binary protocol to ``brokerUrl``.
The C++ client (pulsar-client 3.x) parses the reply strictly: both
``brokerUrl`` and ``brokerUrlTls`` must be present (null when TLS is off) or
it reports "malformed json".  A single broker owns everything, so we never
redirect (307) and ``authoritative`` is accepted and ignored.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from magnetar.web.paths import topic_name

LOOKUP_KEYS = ("brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl")

router = APIRouter(tags=["lookup"])


@router.get("/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}")
async def lookup_topic(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, authoritative: bool = False
) -> dict[str, Any]:
    svc = request.app.state.broker_service
    answer = dict(await svc.lookup(topic_name(domain, tenant, namespace, topic)))
    for key in LOOKUP_KEYS:  # the cpp client insists on every key being present
        answer.setdefault(key, answer.get("brokerUrl") if key == "nativeUrl" else None)
    return answer
