"""The consumer of one topic or partition: subscription, permits, decoding, acks, redelivery.

Theory of operation: a :class:`PartitionConsumer` subscribes on the owner
broker's connection (lookup, SUBSCRIBE, then FLOW for ``receiver_queue_size``
permits) and turns every MESSAGE into :class:`Message` objects put on its
parent's queue (``ConsumerBase``; one queue for all partitions and topics of a
multi-topic consumer). Decoding, in order: CRC32-C check (a corrupt entry is
acked with a validation error, as the official clients do), chunk reassembly
(``protocol.chunks.ChunkAssembler``), decompression, batch records (indexes
whose ``ack_set`` bit is clear were acked before and are skipped), and for
readers and after a seek the start-id filter. Every message the application
takes gives back a permit; FLOW is sent when half the queue was freed.
Skipped messages give their permits back at once.

Acks are grouped (``acks.AckGrouper``) and flushed by a tick task every
``ack_group_time_ms``; the same task sends redeliveries that came due
(negative acks after ``negative_ack_redelivery_delay_ms``, ack timeouts after
``ack_timeout_ms``). Shared and Key_Shared redeliver the listed entries;
Exclusive and Failover redeliver everything un-acked (the broker rewinds) and
the local queue is dropped. With a dead-letter policy a message already
delivered ``max_redeliver_count`` times is published to the dead-letter topic
and acked instead of being redelivered.

When the connection drops or the broker sends CLOSE_CONSUMER (after a seek,
an unload), the consumer drops its queued messages (they will come again),
re-subscribes with backoff -- a reader from the last message it handed out --
and grants fresh permits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from magnetar.client.acks import AckGrouper, RedeliveryTracker
from magnetar.client.connection import ClientCnx
from magnetar.client.errors import AlreadyClosed, PulsarException
from magnetar.client.message import Message
from magnetar.common.backoff import Backoff, BackoffConfig
from magnetar.protocol import client_commands
from magnetar.protocol.batch import decode_batch_raw
from magnetar.protocol.chunks import ChunkAssembler, is_chunk
from magnetar.protocol.client_commands import KeySharedPolicy
from magnetar.protocol.compression import decompress
from magnetar.protocol.enums import (
    AckType,
    CommandType,
    InitialPosition,
    ServerError,
    SubType,
    ValidationError,
)
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.frames import Frame
from magnetar.protocol.message_id import INT64_MAX, MessageId
from magnetar.protocol.payload import parse_headers_and_payload
from magnetar.protocol.wire import WireSchema
from magnetar.runtime.rng import Rng

log = logging.getLogger(__name__)
T = CommandType
_FATAL = {
    ServerError.ConsumerBusy, ServerError.AuthorizationError, ServerError.AuthenticationError,
    ServerError.IncompatibleSchema, ServerError.InvalidTopicName, ServerError.NotAllowedError,
    ServerError.TopicNotFound, ServerError.SubscriptionNotFound,
}  # fmt: skip


@dataclass
class ConsumerConf:
    subscription: str
    sub_type: SubType = SubType.Exclusive
    consumer_name: str = ""
    receiver_queue_size: int = 1000
    initial_position: InitialPosition = InitialPosition.Latest
    durable: bool = True
    start_message_id: MessageId | None = None
    start_inclusive: bool = False
    read_compacted: bool = False
    properties: dict[str, str] | None = None
    subscription_properties: dict[str, str] | None = None
    schema: WireSchema | None = None
    ack_group_time_ms: float = 100.0
    batch_index_ack_enabled: bool = False
    negative_ack_delay_ms: float = 60_000.0
    negative_ack_backoff: Any = None  # acks.MultiplierRedeliveryBackoff
    ack_timeout_ms: float = 0.0
    max_redeliver_count: int = 0  # 0: no dead-letter topic
    dead_letter_topic: str | None = None
    replicate_subscription_state: bool = False
    key_shared: KeySharedPolicy | None = None
    priority_level: int = 0
    max_pending_chunked_messages: int = 10
    expire_incomplete_chunks_ms: int = 60_000
    extra: dict[str, Any] = field(default_factory=dict)


def _acked_before(ack_set: list[int], index: int) -> bool:
    """True when the broker's ack_set says batch index ``index`` was acked already (bit clear)."""
    if not ack_set:
        return False
    word = index // 64
    return word >= len(ack_set) or not (ack_set[word] >> (index % 64)) & 1


def _is_special(mid: MessageId) -> bool:
    return mid.ledger_id < 0 or mid.ledger_id == INT64_MAX


class PartitionConsumer:
    def __init__(self, parent: Any, topic: str, partition: int, conf: ConsumerConf) -> None:
        self.parent = parent
        self.client = parent.client
        self.topic = topic
        self.partition = partition
        self.conf = conf
        self.consumer_id = self.client.next_consumer_id()
        self._cnx: ClientCnx | None = None
        self._ready = False
        self._closed = False
        self._permits = 0
        self._start_id = conf.start_message_id
        self._start_inclusive = conf.start_inclusive
        self.last_dequeued: MessageId | None = None
        self._acks = AckGrouper(conf.batch_index_ack_enabled)
        self._redeliver = RedeliveryTracker()
        self._chunks = ChunkAssembler(conf.max_pending_chunked_messages, conf.expire_incomplete_chunks_ms)
        self._chunk_ids: dict[str, list[MessageId]] = {}
        self._tick_task: asyncio.Task[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self.is_active: bool | None = None
        self.reached_end = False

    # ------------------------------------------------------------------ subscribe
    async def start(self) -> None:
        await self._subscribe()
        self._tick_task = asyncio.create_task(self._tick_loop())

    async def _subscribe(self) -> None:
        logical, physical = await self.client.lookup.lookup(self.topic)
        cnx = await self.client.pool.get(logical, physical)
        c = self.conf
        start = None
        if not c.durable and self._start_id is not None:
            start = self._start_id
        cnx.add_consumer(self.consumer_id, self)
        try:
            await cnx.request(
                T.SUBSCRIBE,
                lambda rid: client_commands.subscribe(
                    self.topic, c.subscription, c.sub_type, self.consumer_id, rid, c.consumer_name,
                    priority_level=c.priority_level, durable=c.durable, start_message_id=start,
                    metadata=c.properties, read_compacted=c.read_compacted, schema=c.schema,
                    initial_position=c.initial_position,
                    replicate_subscription_state=c.replicate_subscription_state,
                    key_shared=c.key_shared if c.sub_type == SubType.Key_Shared else None,
                    subscription_properties=c.subscription_properties,
                ),
            )  # fmt: skip
        except BaseException:
            cnx.remove_consumer(self.consumer_id)
            raise
        self._cnx = cnx
        self._ready = True
        self._permits = 0
        if c.receiver_queue_size > 0:
            cnx.write(client_commands.flow(self.consumer_id, c.receiver_queue_size))

    # ------------------------------------------------------------------ incoming
    def handle_frame(self, frame: Frame) -> None:
        ftype = frame.type
        if ftype is T.MESSAGE:
            try:
                self._on_message(frame)
            except ProtocolError as exc:
                log.warning("%s: dropping undecodable message: %s", self.topic, exc)
                self._discard(frame, ValidationError.BatchDeSerializeError)
        elif ftype in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
            self._lost_connection()
        elif ftype is T.ACTIVE_CONSUMER_CHANGE:
            self.is_active = frame.command.is_active
        elif ftype is T.REACHED_END_OF_TOPIC:
            self.reached_end = True

    def _discard(self, frame: Frame, error: ValidationError) -> None:
        cmd: Any = frame.command
        mid = MessageId(cmd.message_id.ledgerId, cmd.message_id.entryId)
        if self._cnx is not None and not self._cnx.is_closed:
            self._cnx.write(
                client_commands.ack(self.consumer_id, AckType.Individual, [mid], validation_error=error)
            )
        self._give_back(1)

    def _on_message(self, frame: Frame) -> None:
        cmd: Any = frame.command
        parsed = parse_headers_and_payload(frame.headers_and_payload or b"")
        if not parsed.checksum_ok:
            self._discard(frame, ValidationError.ChecksumMismatch)
            return
        meta = parsed.metadata
        base = MessageId.from_pb(cmd.message_id)
        mid = MessageId(base.ledger_id, base.entry_id, self.partition)
        payload = parsed.payload
        chunk_ids: tuple[MessageId, ...] = ()
        if is_chunk(meta):
            ids = self._chunk_ids.setdefault(meta.uuid, [])
            if meta.chunk_id == 0:
                ids.clear()
            ids.append(mid)
            whole = self._chunks.add(meta, payload, int(time.time() * 1000))
            if whole is None:
                self._give_back(1)
                return
            chunk_ids = tuple(self._chunk_ids.pop(meta.uuid, ids))
            payload = whole
            mid = MessageId(mid.ledger_id, mid.entry_id, self.partition, first_chunk=chunk_ids[0])
        if meta.HasField("compression") and meta.compression:
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        redelivery = cmd.redelivery_count
        common = dict(
            _publish_time=meta.publish_time, _redelivery_count=redelivery,
            _schema_version=meta.schema_version, _producer_name=meta.producer_name,
            _schema=self.parent.schema, _consumer=self,
            _replicated_from=meta.replicated_from if meta.HasField("replicated_from") else None,
        )  # fmt: skip
        queue = self.parent.queue
        if meta.HasField("num_messages_in_batch"):
            n = meta.num_messages_in_batch
            records = decode_batch_raw(payload, n)
            ack_set = list(cmd.ack_set)
            if ack_set:
                self._acks.batches.seed(
                    mid.ledger_id, mid.entry_id, {i for i in range(n) if not _acked_before(ack_set, i)}
                )
            filtering = self._start_id is not None and not _is_special(self._start_id)
            skipped = 0
            topic, part, led, ent = self.topic, self.partition, mid.ledger_id, mid.entry_id
            publish, schema_version, producer = meta.publish_time, meta.schema_version, meta.producer_name
            schema, replicated = self.parent.schema, common["_replicated_from"]
            for i, (rec, body) in enumerate(records):
                rid = MessageId(led, ent, part, i, n)
                if (
                    (ack_set and _acked_before(ack_set, i))
                    or rec.compacted_out
                    or (filtering and self._before_start(rid))
                ):
                    skipped += 1
                    continue
                props = {kv.key: kv.value for kv in rec.properties} if rec.properties else {}
                queue.put(
                    Message(
                        topic, rid, body, props,
                        rec.partition_key if rec.HasField("partition_key") else None,
                        rec.ordering_key if rec.HasField("ordering_key") else None,
                        publish, rec.event_time, redelivery, schema_version, producer,
                        rec.sequence_id if rec.HasField("sequence_id") else meta.sequence_id + i,
                        schema, self, (), replicated,
                    )
                )  # fmt: skip
            if skipped:
                self._give_back(skipped)
            return
        if self._before_start(mid):
            self._give_back(1)
            return
        queue.put(
            Message(
                self.topic, mid, payload, {kv.key: kv.value for kv in meta.properties},
                meta.partition_key if meta.HasField("partition_key") else None,
                meta.ordering_key if meta.HasField("ordering_key") else None,
                _event_time=meta.event_time, _sequence_id=meta.sequence_id, _chunk_ids=chunk_ids, **common,
            )
        )  # fmt: skip

    def _before_start(self, mid: MessageId) -> bool:
        s = self._start_id
        if s is None or _is_special(s):
            return False
        key, skey = (mid.ledger_id, mid.entry_id), (s.ledger_id, s.entry_id)
        if key != skey:
            return key < skey
        if s.batch_index < 0 or mid.batch_index < 0:
            return not self._start_inclusive
        return mid.batch_index < s.batch_index or (
            not self._start_inclusive and mid.batch_index == s.batch_index
        )

    # ------------------------------------------------------------------ permits
    def message_dequeued(self, msg: Message) -> None:
        """The application took ``msg``: a permit comes back, ack timeout starts."""
        self.last_dequeued = msg.message_id()
        if self.conf.ack_timeout_ms > 0:
            self._redeliver.schedule(
                msg.message_id(), time.monotonic() + self.conf.ack_timeout_ms / 1000, msg
            )
        self._give_back(1)

    def _give_back(self, n: int) -> None:
        size = self.conf.receiver_queue_size
        if size <= 0:
            return
        self._permits += n
        if self._permits >= max(1, size // 2) and self._ready and self._cnx is not None:
            permits, self._permits = self._permits, 0
            with contextlib.suppress(PulsarException):
                self._cnx.write(client_commands.flow(self.consumer_id, permits))

    def flow(self, n: int) -> None:
        if self._ready and self._cnx is not None:
            self._cnx.write(client_commands.flow(self.consumer_id, n))

    # ------------------------------------------------------------------ acks
    def acknowledge(self, msg_id: MessageId, chunk_ids: tuple[MessageId, ...] = ()) -> None:
        if len(self._redeliver):
            self._redeliver.cancel(msg_id)
        full = False
        for cid in chunk_ids or (msg_id,):
            full = self._acks.add_individual(cid) or full
        if full:
            self.flush_acks()

    def acknowledge_cumulative(self, msg_id: MessageId) -> None:
        self._redeliver.cancel_up_to(msg_id)
        self._acks.add_cumulative(msg_id)

    def flush_acks(self) -> None:
        if not len(self._acks) or not self._ready or self._cnx is None:
            return
        individual, cumulative = self._acks.take()
        try:
            if individual:
                self._cnx.write(client_commands.ack(self.consumer_id, AckType.Individual, individual))
            if cumulative is not None:
                self._cnx.write(client_commands.ack(self.consumer_id, AckType.Cumulative, [cumulative]))
        except PulsarException:
            pass  # the broker redelivers what it did not get

    def negative_acknowledge(self, msg: Message) -> None:
        backoff = self.conf.negative_ack_backoff
        delay_ms = backoff.next_ms(msg.redelivery_count()) if backoff else self.conf.negative_ack_delay_ms
        self._redeliver.schedule(msg.message_id(), time.monotonic() + delay_ms / 1000, msg)

    async def _tick_loop(self) -> None:
        period = max(0.01, min(self.conf.ack_group_time_ms, 100.0) / 1000.0)
        while not self._closed:
            await asyncio.sleep(period)
            self.flush_acks()
            if len(self._redeliver):
                due = self._redeliver.due(time.monotonic())
                if due:
                    await self._redeliver_messages(due)

    async def _redeliver_messages(self, msgs: list[Message]) -> None:
        c = self.conf
        if c.max_redeliver_count > 0:
            keep = []
            for m in msgs:
                if m.redelivery_count() >= c.max_redeliver_count:
                    await self.parent.send_to_dead_letter(self, m)
                    self.acknowledge(m.message_id(), m._chunk_ids)
                else:
                    keep.append(m)
            msgs = keep
            self.flush_acks()
        if not msgs or not self._ready or self._cnx is None:
            return
        if c.sub_type in (SubType.Shared, SubType.Key_Shared):
            ids = list(
                {(m.message_id().ledger_id, m.message_id().entry_id): m.message_id() for m in msgs}.values()
            )
            self._cnx.write(client_commands.redeliver_unacknowledged(self.consumer_id, ids))
        else:
            self.redeliver_all()

    def redeliver_all(self) -> None:
        if not self._ready or self._cnx is None:
            return
        dropped = self.parent.queue.remove_if(lambda m: m._consumer is self)
        self._cnx.write(client_commands.redeliver_unacknowledged(self.consumer_id))
        self._redeliver.clear()
        if dropped:
            self._give_back(dropped)

    # ------------------------------------------------------------------ seek, last id
    async def seek(self, target: MessageId | int) -> None:
        cnx = self._require_cnx()
        if isinstance(target, MessageId):
            self._start_id, self._start_inclusive = target, True
            build = lambda rid: client_commands.seek(self.consumer_id, rid, message_id=target)  # noqa: E731
        else:
            self._start_id = None
            build = lambda rid: client_commands.seek(self.consumer_id, rid, message_publish_time=target)  # noqa: E731
        self.last_dequeued = None
        await cnx.request(T.SEEK, build)
        self.parent.queue.remove_if(lambda m: m._consumer is self)
        self._acks.take()
        self._acks.batches.clear()
        self._redeliver.clear()

    async def get_last_message_id(self) -> tuple[MessageId, MessageId | None]:
        cnx = self._require_cnx()
        frame = await cnx.request(
            T.GET_LAST_MESSAGE_ID, lambda rid: client_commands.get_last_message_id(self.consumer_id, rid)
        )
        resp: Any = frame.command
        last = MessageId.from_pb(resp.last_message_id)
        last = MessageId(last.ledger_id, last.entry_id, self.partition, last.batch_index)
        mark = None
        if resp.HasField("consumer_mark_delete_position"):
            mark = MessageId.from_pb(resp.consumer_mark_delete_position)
        return last, mark

    def _require_cnx(self) -> ClientCnx:
        if self._closed:
            raise AlreadyClosed(f"consumer on {self.topic} is closed")
        if self._cnx is None or not self._ready:
            raise PulsarException(f"consumer on {self.topic} is not connected")
        return self._cnx

    # ------------------------------------------------------------------ reconnect
    def connection_closed(self, cnx: ClientCnx) -> None:
        if cnx is self._cnx:
            self._lost_connection()

    def _lost_connection(self) -> None:
        self._ready = False
        if self._cnx is not None:
            self._cnx.remove_consumer(self.consumer_id)
        self._cnx = None
        if self._closed:
            return
        self.parent.queue.remove_if(lambda m: m._consumer is self)
        if not self.conf.durable and self.last_dequeued is not None:
            self._start_id, self._start_inclusive = self.last_dequeued, False
        self._acks.batches.clear()
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = Backoff(BackoffConfig(100, 30_000), Rng())
        while not self._closed:
            await asyncio.sleep(backoff.next_s())
            try:
                await self._subscribe()
                return
            except PulsarException as exc:
                if getattr(exc, "code", None) in _FATAL and exc.code != ServerError.ConsumerBusy:
                    log.error("%s: cannot re-subscribe: %s", self.topic, exc)
                    return
                log.info("%s: re-subscribe failed (%s); retrying", self.topic, exc)
            except OSError as exc:
                log.info("%s: re-subscribe failed (%s); retrying", self.topic, exc)

    # ------------------------------------------------------------------ close
    async def close(self, unsubscribe: bool = False) -> None:
        if self._closed:
            return
        self.flush_acks()
        cnx = self._cnx
        if unsubscribe:
            await self._require_cnx().request(
                T.UNSUBSCRIBE, lambda rid: client_commands.unsubscribe(self.consumer_id, rid)
            )
        self._closed = True
        for task in (self._tick_task, self._reconnect_task):
            if task is not None:
                task.cancel()
        self._ready = False
        self._cnx = None
        if cnx is not None and not cnx.is_closed:
            if not unsubscribe:
                with contextlib.suppress(PulsarException):
                    await cnx.request(T.CLOSE_CONSUMER, lambda rid: _close_consumer(self.consumer_id, rid))
            cnx.remove_consumer(self.consumer_id)


def _close_consumer(consumer_id: int, request_id: int) -> bytes:
    from magnetar.protocol.server_commands import close_consumer

    return close_consumer(consumer_id, request_id)
