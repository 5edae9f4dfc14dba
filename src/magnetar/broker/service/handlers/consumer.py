"""Consumer commands: SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES,
UNSUBSCRIBE, CLOSE_CONSUMER, SEEK, GET_LAST_MESSAGE_ID.

Theory of operation: SUBSCRIBE loads the topic (auto-creating per policy),
gets or creates the subscription (durable cursor, or a non-durable one for
readers positioned from ``start_message_id``), attaches a Consumer and
answers SUCCESS; messages flow only after the client's FLOW grants permits.
Message ids arrive as uint64 and are read as signed (-1 = earliest,
INT64_MAX = latest).

A second consumer refused with ConsumerBusy first checks whether the holder's
connection is alive (PING, 2 s); a silently dead one is closed and the
newcomer admitted -- a client that reconnects after a network failure gets
its Exclusive subscription back at once, not after the keep-alive timeout.

SEEK follows Java: reset the cursor, disconnect the subscription's consumers
with CLOSE_CONSUMER, then answer SUCCESS; the client re-subscribes and
filters with its remembered seek id.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.service.admission import check_subscribe, check_subscribe_rate, unacked_limit_on_consumer
from magnetar.broker.service.compacted_dispatch import CompactedDispatcher, enable_read_compacted
from magnetar.broker.service.consumer import Consumer
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.schemas import check_consumer_schema
from magnetar.broker.service.subscription import SUB_TYPE_NAMES
from magnetar.broker.transaction.model import TxnID
from magnetar.managed_ledger.api import Position
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import AckType, InitialPosition, SubType
from magnetar.protocol.message_id import INT64_MAX, MessageId, to_signed64
from magnetar.protocol.payload import peek_metadata

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection

log = logging.getLogger(__name__)

LIVENESS_TIMEOUT_S = 2.0


def _pos(mid: Any) -> Position:
    return Position(to_signed64(mid.ledgerId), to_signed64(mid.entryId))


async def handle_subscribe(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    svc = cnx.service
    existing = cnx.consumers.get(cmd.consumer_id)
    if existing is not None:
        if (
            existing.subscription.name == cmd.subscription
            and existing.subscription.topic.name == parse_topic(cmd.topic).full_name
        ):
            cnx.write(cmds.success(cmd.request_id))
            return
        raise errors.ConsumerBusyError(f"Consumer id {cmd.consumer_id} is already in use on this connection")
    sub_type = cmd.subType
    type_name = SUB_TYPE_NAMES.get(sub_type, "")
    if type_name not in svc.config.subscription_types_enabled:
        raise errors.NotAllowedError(f"Subscription type {type_name} is not enabled on this broker")
    ref = parse_topic(cmd.topic)
    force_create = cmd.force_topic_creation if cmd.HasField("force_topic_creation") else True
    topic = await svc.topics.get_topic(ref, create=force_create)
    check_subscribe(topic, cmd.subscription, sub_type)  # effective policies (.admission)
    check_subscribe_rate(topic, cnx.peer_address.rsplit(":", 1)[0], cmd.consumer_name)
    durable = cmd.durable if cmd.HasField("durable") else True
    if (
        durable
        and cmd.subscription not in topic.subscriptions
        and not svc.config.allow_auto_subscription_creation
    ):
        if cmd.subscription not in topic.stored_cursors:
            raise errors.SubscriptionNotFoundError(f"Subscription {cmd.subscription} does not exist")
    await check_consumer_schema(svc, topic, cmd)
    start = _pos(cmd.start_message_id) if cmd.HasField("start_message_id") else None
    initial = cmd.initialPosition if cmd.HasField("initialPosition") else InitialPosition.Latest
    sub = await topic.get_or_create_subscription(cmd.subscription, initial, durable, start)
    if durable and cmd.HasField("replicate_subscription_state"):
        await svc.replication.subscription_state(topic, cmd.subscription, cmd.replicate_subscription_state)
    if cmd.HasField("read_compacted") and cmd.read_compacted:
        enable_read_compacted(svc, sub, sub_type, start, initial)
    consumer = Consumer(
        sub,
        cnx,
        cmd.consumer_id,
        cmd.consumer_name,
        cmd.priority_level if cmd.HasField("priority_level") else 0,
        sub_type,
        topic.partition_index,
        unacked_limit_on_consumer(topic, svc.config.max_unacked_messages_per_consumer)
        if sub_type in (SubType.Shared, SubType.Key_Shared)
        else 0,
        {kv.key: kv.value for kv in cmd.metadata},
        svc.clock.time_ms(),
    )
    if sub_type == SubType.Key_Shared:
        consumer.key_shared_meta = cmd.keySharedMeta if cmd.HasField("keySharedMeta") else None
    if cnx.closed:
        raise errors.ServiceNotReadyError("Connection closed")
    try:
        sub.add_consumer(consumer)
    except errors.ConsumerBusyError:
        # The holder may be a connection that died without a FIN: ask it, as Java does.
        if not await _evict_dead_holders(sub, cnx) or cnx.closed:
            raise
        sub.add_consumer(consumer)
    cnx.consumers[cmd.consumer_id] = consumer
    cnx.write(cmds.success(cmd.request_id))


async def _evict_dead_holders(sub: Any, asking: Connection) -> bool:
    """Close the connections of the subscription's consumers that do not answer a PING.

    The asking connection is alive by definition (and could not read a PONG while its
    handler waits), so its own consumers are never checked.
    """
    evicted = False
    for holder in sub.consumers:
        if holder.cnx is asking:
            continue
        if not await holder.cnx.check_liveness(LIVENESS_TIMEOUT_S):
            log.info(
                "consumer %s on %s does not answer: closing its connection", holder.consumer_name, sub.name
            )
            await holder.cnx.close()
            evicted = True
    return evicted


def handle_flow(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is not None:
        consumer.subscription.flow(consumer, cmd.messagePermits)


async def handle_ack(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is None:
        if cmd.HasField("request_id"):
            raise errors.ConsumerNotFoundError(f"Consumer {cmd.consumer_id} not found")
        return
    sub = consumer.subscription
    ic = cnx.service.interceptor
    if ic is not None:
        positions = [(_pos(m).ledger_id, _pos(m).entry_id) for m in cmd.message_id]
        ic.on_message_ack(consumer, positions, cmd.ack_type == AckType.Cumulative)
    if cmd.HasField("txnid_most_bits") and cmd.HasField("txnid_least_bits"):  # transaction.pending_ack
        txnid = TxnID(cmd.txnid_most_bits, cmd.txnid_least_bits)
        acks = [
            (_pos(m), list(m.ack_set) or None, m.batch_size if m.HasField("batch_size") else 0)
            for m in cmd.message_id
        ]
        await sub.ack_in_txn(consumer, txnid, acks, cmd.ack_type == AckType.Cumulative)
    elif cmd.ack_type == AckType.Cumulative:
        if cmd.message_id:
            mid = cmd.message_id[-1]
            await sub.ack_cumulative(consumer, _pos(mid), list(mid.ack_set) or None)
    else:
        await sub.ack_individual(consumer, _individual_acks(cmd.message_id))
    if cmd.HasField("request_id"):
        cnx.write(cmds.ack_response(cmd.consumer_id, cmd.request_id))


def _individual_acks(mids: Any) -> list[tuple[Position, list[int] | None]]:
    """(position, ack set or None) per message id of an ACK (the hot path: a client's grouped
    ACK carries up to a thousand ids)."""
    out = []
    for m in mids:
        lid, eid = m.ledgerId, m.entryId
        if lid > INT64_MAX:
            lid -= 1 << 64
        if eid > INT64_MAX:
            eid -= 1 << 64
        ack_set = m.ack_set
        out.append((Position(lid, eid), list(ack_set) if len(ack_set) else None))
    return out


async def handle_redeliver(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is None:
        return
    positions = [_pos(m) for m in cmd.message_ids] or None
    consumer.subscription.redeliver_unacknowledged(consumer, positions)


async def handle_unsubscribe(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is None:
        raise errors.ConsumerNotFoundError(f"Consumer {cmd.consumer_id} not found")
    sub = consumer.subscription
    force = cmd.HasField("force") and cmd.force
    others = [c for c in sub.consumers if c is not consumer]
    if others and not force:
        raise errors.ConsumerBusyError("Subscription has other connected consumers")
    for c in others:
        c.cnx.broker_closed_consumer(c)
    del cnx.consumers[cmd.consumer_id]
    for c in [consumer, *others]:
        sub.remove_consumer(c)
    await sub.topic.unsubscribe(sub)
    cnx.write(cmds.success(cmd.request_id))


async def handle_close_consumer(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.pop(cmd.consumer_id, None)
    if consumer is not None:
        await consumer.subscription.topic.remove_consumer(consumer)
    cnx.write(cmds.success(cmd.request_id))


async def handle_seek(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is None:
        raise errors.ConsumerNotFoundError(f"Consumer {cmd.consumer_id} not found")
    sub = consumer.subscription
    topic = sub.topic
    if not topic.ref.persistent:  # nothing is stored, so there is nothing to move back to
        raise errors.NotAllowedError("Seek is not allowed on a non-persistent topic")
    if cmd.HasField("message_publish_time"):
        position = await sub.cursor.find_position_by_publish_time(
            cmd.message_publish_time, lambda data: peek_metadata(data).publish_time
        )
    elif cmd.HasField("message_id"):
        target = _pos(cmd.message_id)
        if target.ledger_id < 0 or target.entry_id < 0:
            position = Position.EARLIEST
        elif target.ledger_id >= INT64_MAX:
            position = topic.ml.last_confirmed_entry.next()
        else:
            position = target
    else:
        raise errors.NotAllowedError("SEEK needs a message id or a publish time")
    for c in sub.consumers:
        c.cnx.broker_closed_consumer(c)
        sub.remove_consumer(c)  # a reader's subscription stays: the client re-subscribes to it
    await sub.reset_to(position)
    cnx.write(cmds.success(cmd.request_id))


async def handle_get_last_message_id(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is None:
        raise errors.ConsumerNotFoundError(f"Consumer {cmd.consumer_id} not found")
    topic = consumer.subscription.topic
    pos, batch_index = await topic.last_message_id()
    if isinstance(consumer.subscription.dispatcher, CompactedDispatcher):
        pos, batch_index = await consumer.subscription.dispatcher.last_message_id(pos, batch_index)
    md = consumer.subscription.cursor.mark_delete_position
    cnx.write(
        cmds.get_last_message_id_response(
            cmd.request_id,
            MessageId(pos.ledger_id, pos.entry_id, topic.partition_index, batch_index),
            MessageId(md.ledger_id, md.entry_id, topic.partition_index),
        )
    )
