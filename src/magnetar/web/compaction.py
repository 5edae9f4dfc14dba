"""Topic compaction resources: ``/admin/v2/{domain}/{tenant}/{namespace}/{topic}/compaction``.

Theory of operation: ``PUT`` starts a compaction of the topic in the background
and answers 204 at once (Pulsar's ``triggerCompaction``); a second ``PUT``
while that run is in progress is refused with 409 "Compaction already in
progress" and changes nothing.  ``GET`` answers Pulsar's
LongRunningProcessStatus ``{"status": "NOT_RUN"|"RUNNING"|"SUCCESS"|"ERROR",
"lastError": ""}``.  Both go to ``broker_service.compaction``
(``broker.service.compacted_dispatch.BrokerCompaction``), which checks that
the namespace (404) and the topic (404 "Topic not found") exist; a
non-persistent topic is 405 as in Pulsar.  A partitioned topic's base name is
404 here too: compaction is per partition.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from magnetar.web.deps import broker
from magnetar.web.errors import WebError
from magnetar.web.paths import topic_name

router = APIRouter(tags=["compaction"])

PATH = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/compaction"


def _compaction(request: Request, domain: str):  # type: ignore[no-untyped-def]
    if domain == "non-persistent":
        raise WebError(405, "Compaction is not allowed on non-persistent topics")
    compaction = getattr(broker(request), "compaction", None)
    if compaction is None:
        raise WebError(503, "Compaction is not available on this broker")
    return compaction


@router.put(PATH, status_code=204)
async def trigger_compaction(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> Response:
    name = topic_name(domain, tenant, namespace, topic)
    await _compaction(request, domain).trigger(name)
    return Response(status_code=204)


@router.get(PATH)
async def compaction_status(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> dict:
    name = topic_name(domain, tenant, namespace, topic)
    return await _compaction(request, domain).status(name)
