"""Topic administration: ``/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/...``.

Theory of operation: listing, creation/deletion, stats, internal stats,
subscriptions and cursor operations, peek/examine (binary bodies with
Pulsar's ``X-Pulsar-*`` headers), last message id, terminate, unload.  Each
handler rebuilds the canonical topic name from the path segments and makes
one call into the broker service (topic lifecycle and stats) or
``AdminService.topics`` (cursor operations); errors carry Pulsar's statuses.
The partition-metadata routes stay in ``topics.py``.
"""

from __future__ import annotations

from fastapi import APIRouter, Body, Request, Response

from magnetar.broker.admin.topic_peek import PeekedMessage
from magnetar.common import rest_models as m
from magnetar.web.deps import admin, broker, json_body, no_content
from magnetar.web.errors import WebError
from magnetar.web.paths import DOMAINS, namespace_name, topic_name
from magnetar.web.topics import parse_partition_count

router = APIRouter(tags=["topics"])

NSP = "/admin/v2/{domain}/{tenant}/{namespace}"
TP = NSP + "/{topic}"


@router.get(NSP)
async def list_topics(request: Request, domain: str, tenant: str, namespace: str) -> list[str]:
    if domain not in DOMAINS:
        raise WebError(404, f"Unknown domain {domain!r}")
    mode = "PERSISTENT" if domain == "persistent" else "NON_PERSISTENT"
    return list(await broker(request).list_topics(namespace_name(tenant, namespace), mode=mode))


@router.get(NSP + "/partitioned")
async def list_partitioned(request: Request, domain: str, tenant: str, namespace: str) -> list[str]:
    if domain not in DOMAINS:
        raise WebError(404, f"Unknown domain {domain!r}")
    names = await broker(request).list_partitioned_topics(namespace_name(tenant, namespace))
    return [n for n in names if n.startswith(domain + "://")]


@router.put(TP, status_code=204)
async def create_topic(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> Response:
    name = topic_name(domain, tenant, namespace, topic)
    props = await json_body(request, optional=True)
    if props is not None and not isinstance(props, dict):
        raise WebError(400, "topic properties must be a JSON object")
    await broker(request).create_non_partitioned_topic(name)
    return no_content()


@router.delete(TP, status_code=204)
async def delete_topic(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, force: bool = False
) -> Response:
    await broker(request).delete_topic(topic_name(domain, tenant, namespace, topic), force=force)
    return no_content()


@router.delete(TP + "/partitions", status_code=204)
async def delete_partitioned(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, force: bool = False
) -> Response:
    name = topic_name(domain, tenant, namespace, topic)
    await admin(request).topics.delete_partitions_elsewhere(name, force=force)  # a cluster's other owners
    await broker(request).delete_partitioned_topic(name, force=force)
    return no_content()


@router.post(TP + "/partitions", status_code=204)
async def update_partitions(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> Response:
    count = parse_partition_count(await request.body())
    await broker(request).update_partitioned_topic(topic_name(domain, tenant, namespace, topic), count)
    return no_content()


@router.post(TP + "/createMissedPartitions", status_code=204)
async def create_missed_partitions(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> Response:
    name = topic_name(domain, tenant, namespace, topic)
    if not await broker(request).get_partitioned_metadata(name):
        raise WebError(409, "Partitioned topic does not exist")
    return no_content()


@router.put(TP + "/unload", status_code=204)
async def unload(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> Response:
    await admin(request).topics.unload_topic(topic_name(domain, tenant, namespace, topic))
    return no_content()


@router.get(TP + "/stats")
async def stats(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> dict:
    return await admin(request).topics.topic_stats(topic_name(domain, tenant, namespace, topic))


@router.get(TP + "/partitioned-stats")
async def partitioned_stats(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    perPartition: bool = True,  # noqa: N803
) -> dict:
    return await admin(request).topics.partitioned_topic_stats(
        topic_name(domain, tenant, namespace, topic), per_partition=perPartition
    )


@router.get(TP + "/internalStats")
async def internal_stats(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, metadata: bool = False
) -> dict:
    return await admin(request).topics.internal_stats(topic_name(domain, tenant, namespace, topic), metadata)


@router.get(TP + "/partitioned-internalStats")
async def partitioned_internal_stats(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> dict:
    return await admin(request).topics.partitioned_internal_stats(
        topic_name(domain, tenant, namespace, topic)
    )


@router.get(TP + "/subscriptions")
async def subscriptions(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> list[str]:
    return await admin(request).topics.list_subscriptions(topic_name(domain, tenant, namespace, topic))


@router.put(TP + "/subscription/{subscription}", status_code=204)
async def create_subscription(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    body: m.ResetCursorData | None = None,
    replicated: bool = False,
) -> Response:
    await admin(request).topics.create_subscription(
        topic_name(domain, tenant, namespace, topic), subscription, body
    )
    return no_content()


@router.delete(TP + "/subscription/{subscription}", status_code=204)
async def delete_subscription(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    force: bool = False,
) -> Response:
    await admin(request).topics.delete_subscription(
        topic_name(domain, tenant, namespace, topic), subscription, force
    )
    return no_content()


@router.post(TP + "/subscription/{subscription}/skip_all", status_code=204)
async def skip_all(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, subscription: str
) -> Response:
    await admin(request).topics.skip_all(topic_name(domain, tenant, namespace, topic), subscription)
    return no_content()


@router.post(TP + "/subscription/{subscription}/skip/{numMessages}", status_code=204)
async def skip(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    numMessages: int,  # noqa: N803
) -> Response:
    await admin(request).topics.skip(topic_name(domain, tenant, namespace, topic), subscription, numMessages)
    return no_content()


@router.post(TP + "/all_subscription/expireMessages/{expireTimeInSeconds}", status_code=204)
async def expire_all(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    expireTimeInSeconds: int,  # noqa: N803
) -> Response:
    await admin(request).topics.expire_messages(
        topic_name(domain, tenant, namespace, topic), None, expireTimeInSeconds
    )
    return no_content()


@router.post(TP + "/subscription/{subscription}/expireMessages/{expireTimeInSeconds}", status_code=204)
async def expire(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    expireTimeInSeconds: int,  # noqa: N803
) -> Response:
    await admin(request).topics.expire_messages(
        topic_name(domain, tenant, namespace, topic), subscription, expireTimeInSeconds
    )
    return no_content()


@router.post(TP + "/subscription/{subscription}/expireMessages", status_code=204)
async def expire_to(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    body: m.ResetCursorData,
) -> Response:
    await admin(request).topics.expire_to_position(
        topic_name(domain, tenant, namespace, topic), subscription, body
    )
    return no_content()


@router.post(TP + "/subscription/{subscription}/resetcursor/{timestamp}", status_code=204)
async def reset_by_time(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, subscription: str, timestamp: int
) -> Response:
    await admin(request).topics.reset_by_time(
        topic_name(domain, tenant, namespace, topic), subscription, timestamp
    )
    return no_content()


@router.post(TP + "/subscription/{subscription}/resetcursor", status_code=204)
async def reset_by_position(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    body: m.ResetCursorData,
) -> Response:
    await admin(request).topics.reset_by_position(
        topic_name(domain, tenant, namespace, topic), subscription, body
    )
    return no_content()


def _binary(msg: PeekedMessage) -> Response:
    return Response(content=msg.payload, media_type="application/octet-stream", headers=msg.headers)


@router.get(TP + "/subscription/{subscription}/position/{messagePosition}", response_class=Response)
async def peek(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    messagePosition: int,  # noqa: N803
) -> Response:
    return _binary(
        await admin(request).topics.peek(
            topic_name(domain, tenant, namespace, topic), subscription, messagePosition
        )
    )


@router.get(TP + "/examinemessage", response_class=Response)
async def examine(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    initialPosition: str = "latest",
    messagePosition: int = 1,  # noqa: N803
) -> Response:
    return _binary(
        await admin(request).topics.examine(
            topic_name(domain, tenant, namespace, topic), initialPosition, messagePosition
        )
    )


@router.get(TP + "/ledger/{ledgerId}/entry/{entryId}", response_class=Response)
async def get_message_by_id(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    ledgerId: int,
    entryId: int,  # noqa: N803
) -> Response:
    return _binary(
        await admin(request).topics.get_by_id(topic_name(domain, tenant, namespace, topic), ledgerId, entryId)
    )


@router.get(TP + "/lastMessageId")
async def last_message_id(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> dict:
    if domain != "persistent":
        raise WebError(405, "GetLastMessageId on a non-persistent topic is not allowed")
    return await admin(request).topics.last_message_id(topic_name(domain, tenant, namespace, topic))


@router.post(TP + "/terminate")
async def terminate(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> dict:
    return await admin(request).topics.terminate(topic_name(domain, tenant, namespace, topic))


@router.post(TP + "/terminate/partitions", status_code=204)
async def terminate_partitions(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> Response:
    await admin(request).topics.terminate_partitions(topic_name(domain, tenant, namespace, topic))
    return no_content()


@router.put(TP + "/compaction", status_code=204)
async def trigger_compaction(
    request: Request, domain: str, tenant: str, namespace: str, topic: str
) -> Response:
    await admin(request).schemas.compact(topic_name(domain, tenant, namespace, topic))
    return no_content()


@router.get(TP + "/compaction")
async def compaction_status(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> dict:
    return await admin(request).schemas.compaction_status(topic_name(domain, tenant, namespace, topic))


_ = Body
