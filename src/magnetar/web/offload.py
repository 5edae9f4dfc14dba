"""Topic offload resources: ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/offload``.

Theory of operation: ``PUT`` with a MessageId body (``{"ledgerId": L, "entryId": E}``)
starts offloading the topic's ledgers before the one holding that position and
answers 204 at once (Pulsar's ``triggerOffload``; 400 "messageId is null" without
one, 405 on a non-persistent or partitioned topic, 409 while a run is in
progress, 412 when tiered storage is not configured).  ``GET`` answers Pulsar's
OffloadProcessStatus ``{"status": "NOT_RUN"|"RUNNING"|"SUCCESS"|"ERROR",
"lastError": "...", "firstUnoffloadedMessage": {...}}``.  The logic is
:mod:`magnetar.broker.admin.offload`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from magnetar.broker.admin.offload import TopicOffloadAdmin, parse_message_id
from magnetar.web.deps import json_body
from magnetar.web.errors import WebError
from magnetar.web.paths import topic_name

router = APIRouter(tags=["offload"])

PATH = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/offload"


def _offload(request: Request, domain: str) -> TopicOffloadAdmin:
    if domain == "non-persistent":
        raise WebError(405, "Offload is not allowed on non-persistent topics")
    return TopicOffloadAdmin(request.app.state.broker_service)


@router.put(PATH, status_code=204)
async def trigger_offload(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> Response:
    name = topic_name(domain, tenant, namespace, topic)
    admin = _offload(request, domain)
    before = parse_message_id(await json_body(request, optional=True))
    await admin.trigger(name, before)
    return Response(status_code=204)


@router.get(PATH)
async def offload_status(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> dict:
    name = topic_name(domain, tenant, namespace, topic)
    return await _offload(request, domain).status(name)
