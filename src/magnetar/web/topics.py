"""Topic resources: ``/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/{topic}...``.

Theory of operation: this issue needs the partitioned-topic metadata that
HTTP-URL clients read before every lookup (``GET .../partitions``, with
``checkAllowAutoCreation``) and its creation (``PUT .../partitions``, body =
the partition count as a bare JSON int, or newer brokers'
``{"partitions": N, "properties": {...}}``).  The rest of the topic admin API
(stats, subscriptions, deletion...) is a later issue and lands in this module
family, one router per concern.  Status codes follow Pulsar: 200 with
``{"partitions": N}``, 204 on creation, errors as ``{"reason"}`` from the
service layer (409 exists, 406 bad count, 412 bad name, 404 namespace).
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response

from magnetar.web.deps import broker
from magnetar.web.errors import WebError
from magnetar.web.paths import topic_name

router = APIRouter(tags=["topics"])

PARTITIONS_PATH = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions"
# A partition-count body is a few bytes; refuse anything silly before parsing it.
PARTITIONS_BODY_BYTES_MAX = 64 * 1024


@router.get(PARTITIONS_PATH)
async def get_partitioned_metadata(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    checkAllowAutoCreation: bool = False,  # noqa: N803 -- Pulsar's query parameter name
) -> dict[str, int]:
    svc = broker(request)
    name = topic_name(domain, tenant, namespace, topic)
    n = await svc.get_partitioned_metadata(name, check_allow_auto_creation=checkAllowAutoCreation)
    return {"partitions": int(n)}


@router.put(PARTITIONS_PATH, status_code=204)
async def create_partitioned_topic(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> Response:
    svc = broker(request)
    name = topic_name(domain, tenant, namespace, topic)
    count = parse_partition_count(await request.body())
    await svc.create_partitioned_topic(name, count)
    return Response(status_code=204)


def parse_partition_count(body: bytes) -> int:
    """A bare JSON int (``4``) or ``{"partitions": 4, ...}``; anything else is a 400."""
    if len(body) > PARTITIONS_BODY_BYTES_MAX:
        raise WebError(400, "partition count body too large")
    try:
        value = json.loads(body.decode("utf-8")) if body.strip() else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WebError(400, "partition count must be a JSON integer") from None
    if isinstance(value, dict):
        value = value.get("partitions")
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise WebError(400, "partition count must be a JSON integer")
    return value
