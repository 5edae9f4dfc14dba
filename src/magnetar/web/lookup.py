"""HTTP topic lookup: ``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}`` and ``.../bundle``.

Theory of operation: clients with an ``http://`` service URL ask here which
broker serves a topic and then speak the binary protocol to ``brokerUrl``.
The namespace service answers (``broker.ownership``): when this broker owns
the topic's bundle (or takes it) the answer is the LookupData of this broker;
when another broker owns it (or was chosen for it) the answer is **307** to
the same lookup on that broker with ``authoritative=true``, which the clients
follow (and where the chosen broker takes the bundle).  A standalone owns
everything and never redirects.  The C++ client (pulsar-client 3.x) parses the
reply strictly: both ``brokerUrl`` and ``brokerUrlTls`` must be present (null
when TLS is off) or it reports "malformed json".

``.../bundle`` answers the topic's bundle range (``0x00000000_0x40000000``),
computed from the namespace's boundaries with Pulsar's topic hash.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from magnetar.broker.service.names import parse_topic
from magnetar.web.deps import broker
from magnetar.web.ownership import redirect_to
from magnetar.web.paths import topic_name

LOOKUP_KEYS = ("brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl")

router = APIRouter(tags=["lookup"])


@router.get("/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle", response_class=PlainTextResponse)
async def bundle_range(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> str:
    svc = broker(request)
    bundle = await svc.namespace_service.bundle_of(parse_topic(topic_name(domain, tenant, namespace, topic)))
    return bundle.range.name


@router.get("/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}")
async def lookup_topic(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, authoritative: bool = False
) -> Any:
    svc = broker(request)
    name = topic_name(domain, tenant, namespace, topic)
    lookup_topic = getattr(svc, "lookup_topic", None)
    if lookup_topic is None:  # a bare service (unit tests of the web layer): always here
        answer = dict(await svc.lookup(name))
    else:
        result = await lookup_topic(name, authoritative)
        if result.redirect:
            return redirect_to(request, result.owner)
        answer = result.as_lookup_data()
    for key in LOOKUP_KEYS:  # the cpp client insists on every key being present
        answer.setdefault(key, answer.get("brokerUrl") if key == "nativeUrl" else None)
    return answer
