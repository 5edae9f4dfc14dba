"""The producer of one topic or one partition: registration, sending, receipts, reconnects.

Theory of operation: a :class:`PartitionProducer` is registered on the
connection of the broker that owns its topic (lookup, then PRODUCER; the
answer gives the producer name, the last sequence id the broker stored and
the schema version). Sending is a pipeline:

1. ``enqueue(msg)`` gives the message its sequence id (``last_sequence_id +
   1`` onwards unless the application set ``initial_sequence_id``) and either
   adds it to the batch container -- one per key with ``batching_type=
   KeyBased`` -- (all flushed when one is full or ``batching_max_
   publish_delay_ms`` after the first message) or builds its SEND now
   (``batching.single_ops``, which chunks large payloads);
2. every OpSend goes to the tail of ``pending`` and, when the producer is
   connected, straight to the socket;
3. SEND_RECEIPTs arrive in send order and complete the head of ``pending``
   (a receipt below the head's sequence id is a stale duplicate and is
   ignored; one above it means the broker and we disagree, and the connection
   is closed so the reconnect resends).

When the connection drops (or the broker sends CLOSE_PRODUCER or
TOPIC_MIGRATED) the producer reconnects with exponential backoff
(``common.backoff``), registers again with ``epoch + 1`` and writes every
pending frame again, unchanged, in order. Errors that cannot heal
(ProducerFenced, TopicTerminated, authorization, incompatible schema) fail the
pending messages and the producer. A send timeout task fails messages that
waited longer than ``send_timeout_ms``. ``max_pending_messages`` bounds
``pending`` plus the open batch: senders wait (``block_if_queue_full``) or get
``ProducerQueueIsFull``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from magnetar.client.batching import BatchContainer, OpSend, OutgoingMessage, ProducerIdentity, single_ops
from magnetar.client.connection import ClientCnx
from magnetar.client.errors import (
    AlreadyClosed,
    ProducerQueueIsFull,
    PulsarException,
    Timeout,
    error_from_code,
)
from magnetar.common.backoff import Backoff, BackoffConfig
from magnetar.protocol import client_commands
from magnetar.protocol.enums import CommandType, ProducerAccessMode, ServerError
from magnetar.protocol.frames import Frame
from magnetar.protocol.message_id import MessageId, to_signed64
from magnetar.protocol.wire import WireSchema
from magnetar.runtime.rng import Rng

log = logging.getLogger(__name__)
T = CommandType
_FATAL = {
    ServerError.ProducerFenced, ServerError.TopicTerminatedError, ServerError.AuthorizationError,
    ServerError.AuthenticationError, ServerError.IncompatibleSchema, ServerError.ProducerBusy,
    ServerError.InvalidTopicName, ServerError.NotAllowedError, ServerError.TopicNotFound,
    ServerError.ProducerBlockedQuotaExceededException,
}  # fmt: skip


@dataclass
class ProducerConf:
    producer_name: str | None = None
    initial_sequence_id: int | None = None
    send_timeout_ms: int = 30_000
    compression: int = 0
    max_pending_messages: int = 1000
    block_if_queue_full: bool = False
    batching_enabled: bool = True
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: float = 10.0
    chunking_enabled: bool = False
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    properties: dict[str, str] | None = None
    schema: WireSchema | None = None
    initial_subscription_name: str | None = None
    key_based_batching: bool = False


class PartitionProducer:
    def __init__(self, client: Any, topic: str, partition: int, conf: ProducerConf) -> None:
        self.client = client
        self.topic = topic
        self.partition = partition
        self.conf = conf
        self.producer_id = client.next_producer_id()
        self.producer_name = conf.producer_name or ""
        self.schema_version = b""
        self._cnx: ClientCnx | None = None
        self._ready = False
        self._epoch = 0
        self._topic_epoch: int | None = None
        self._next_seq = conf.initial_sequence_id + 1 if conf.initial_sequence_id is not None else -1
        self.last_sequence_id_published = -1
        self.pending: deque[OpSend] = deque()
        # one container, or one per key with key-based batching (so a batch has one key for Key_Shared)
        self._batches: dict[Any, BatchContainer] = {}
        self._batch_timer: asyncio.TimerHandle | None = None
        self._in_flight = 0  # messages counted against max_pending_messages
        self._space = asyncio.Event()
        self._space.set()
        self._closed = False
        self._failed: PulsarException | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._timeout_task: asyncio.Task[None] | None = None
        self._ident: ProducerIdentity | None = None

    # ------------------------------------------------------------------ registration
    async def start(self) -> None:
        await self._connect_once()
        if self._next_seq < 0:
            self._next_seq = self.last_sequence_id_published + 1
        if self.conf.send_timeout_ms > 0:
            self._timeout_task = asyncio.create_task(self._timeout_loop())

    async def _connect_once(self) -> None:
        logical, physical = await self.client.lookup.lookup(self.topic)
        cnx = await self.client.pool.get(logical, physical)
        named = self.conf.producer_name is not None
        frame = await cnx.request(
            T.PRODUCER,
            lambda rid: client_commands.producer(
                self.topic,
                self.producer_id,
                rid,
                self.producer_name or None,
                metadata=self.conf.properties,
                schema=self.conf.schema,
                epoch=self._epoch,
                user_provided_producer_name=named,
                access_mode=self.conf.access_mode,
                topic_epoch=self._topic_epoch,
                initial_subscription_name=self.conf.initial_subscription_name,
            ),
            timeout_s=None if self.conf.access_mode == ProducerAccessMode.WaitForExclusive else -1.0,
        )
        resp: Any = frame.command
        self.producer_name = resp.producer_name
        if resp.HasField("last_sequence_id") and resp.last_sequence_id >= 0:
            self.last_sequence_id_published = max(self.last_sequence_id_published, resp.last_sequence_id)
        self.schema_version = resp.schema_version if resp.HasField("schema_version") else b""
        if resp.HasField("topic_epoch"):
            self._topic_epoch = resp.topic_epoch
        self._ident = ProducerIdentity(
            self.producer_id,
            self.producer_name,
            self.conf.compression,
            cnx.max_message_size,
            self.conf.chunking_enabled,
        )
        cnx.add_producer(self.producer_id, self)
        self._cnx = cnx
        self._ready = True
        self._drop_transactional()
        for op in self.pending:  # resend, same bytes, same order
            cnx.write(op.frame)

    # ------------------------------------------------------------------ sending
    async def enqueue(self, msg: OutgoingMessage) -> None:
        if self._closed:
            raise AlreadyClosed(f"producer on {self.topic} is closed")
        if self._failed is not None:
            raise self._failed
        while self._in_flight >= self.conf.max_pending_messages:
            if not self.conf.block_if_queue_full:
                raise ProducerQueueIsFull(f"{self._in_flight} messages pending on {self.topic}")
            self._space.clear()
            await self._space.wait()
            if self._closed:
                raise AlreadyClosed(f"producer on {self.topic} is closed")
        memory = self.client.memory
        if not memory.try_reserve(len(msg.payload)):
            await memory.reserve(len(msg.payload), self.conf.block_if_queue_full)
        msg.on_done = self.client.memory.release
        if msg.sequence_id < 0:
            msg.sequence_id = self._next_seq
            self._next_seq += 1
        else:
            self._next_seq = max(self._next_seq, msg.sequence_id + 1)
        msg.schema_version = self.schema_version or None
        msg.publish_time = self.client.clock_ms()
        self._in_flight += 1
        assert self._ident is not None
        now = time.monotonic()
        batchable = self.conf.batching_enabled and msg.deliver_at is None and msg.txnid is None
        if batchable and len(msg.payload) < self._ident.max_message_size // 2:
            key = (msg.ordering_key or msg.partition_key) if self.conf.key_based_batching else None
            batch = self._batches.get(key)
            if batch is None:
                batch = self._batches[key] = BatchContainer(
                    self.conf.batching_max_messages, self.conf.batching_max_allowed_size_in_bytes
                )
            if not batch.has_room_for(msg):
                self.flush_batch()
            if batch.add(msg):
                self.flush_batch()
            elif self._batch_timer is None:
                delay = self.conf.batching_max_publish_delay_ms / 1000.0
                self._batch_timer = asyncio.get_running_loop().call_later(delay, self.flush_batch)
            return
        self.flush_batch()
        try:
            ops = single_ops(self._ident, msg, self.client.clock_ms(), now)
        except PulsarException:
            self._in_flight -= 1
            self.client.memory.release(len(msg.payload))
            raise
        for op in ops:
            self._push(op)
        await self._maybe_drain()

    def flush_batch(self) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._ident is None:
            return
        full = [b for b in self._batches.values() if len(b)]
        if not full:
            return
        full.sort(key=lambda b: b.messages[0].sequence_id)
        now_ms, now_s = self.client.clock_ms(), time.monotonic()
        for batch in full:
            self._push(batch.build(self._ident, now_ms, now_s))

    def _push(self, op: OpSend) -> None:
        self.pending.append(op)
        if self._ready and self._cnx is not None:
            try:
                self._cnx.write(op.frame)
            except PulsarException:
                pass  # the connection just closed: the reconnect resends

    async def _maybe_drain(self) -> None:
        cnx = self._cnx
        if cnx is not None and cnx.write_buffer_size > 4 * 1024 * 1024:
            await cnx.drain()

    async def flush(self) -> None:
        self.flush_batch()
        futs = [m.future for op in list(self.pending) for m in op.messages]
        if futs:
            await asyncio.gather(*futs, return_exceptions=True)

    # ------------------------------------------------------------------ broker input
    def handle_frame(self, frame: Frame) -> None:
        ftype = frame.type
        if ftype is T.SEND_RECEIPT:
            self._on_receipt(frame.command)
        elif ftype is T.SEND_ERROR:
            self._on_send_error(frame.command)
        elif ftype in (T.CLOSE_PRODUCER, T.TOPIC_MIGRATED):
            self._lost_connection()

    def _on_receipt(self, cmd: Any) -> None:
        seq = cmd.sequence_id
        if not self.pending:
            return
        op = self.pending[0]
        if seq < op.sequence_id:
            return  # an old duplicate
        if seq > op.highest_sequence_id:
            log.warning("%s: receipt %d ahead of pending %d; reconnecting", self.topic, seq, op.sequence_id)
            if self._cnx is not None:
                asyncio.get_running_loop().create_task(self._cnx.close())
            return
        self.pending.popleft()
        mid = MessageId(
            to_signed64(cmd.message_id.ledgerId), to_signed64(cmd.message_id.entryId), self.partition
        )
        self.last_sequence_id_published = max(self.last_sequence_id_published, op.highest_sequence_id)
        if op.chunk_state is not None:
            if op.chunk_id == 0:
                op.chunk_state.first = mid
            if not op.is_last_chunk:
                return
            mid = MessageId(mid.ledger_id, mid.entry_id, self.partition, first_chunk=op.chunk_state.first)
        n = len(op.messages)
        for i, m in enumerate(op.messages):
            m_id = MessageId(mid.ledger_id, mid.entry_id, self.partition, i, n) if op.is_batch else mid
            _resolve(m, m_id, None)
        self._release(op.num_counted)

    def _on_send_error(self, cmd: Any) -> None:
        err = error_from_code(cmd.error, cmd.message)
        if self.pending and (
            cmd.error == ServerError.ChecksumError
            or (self.pending[0].messages and self.pending[0].messages[0].txnid is not None)
        ):
            op = self.pending.popleft()  # a refused transactional send fails alone (its txn aborts)
            self._fail_op(op, err)
            return
        if cmd.error in _FATAL:
            self._fail(err)
            return
        if self._cnx is not None:  # e.g. PersistenceError: reconnect and resend
            asyncio.get_running_loop().create_task(self._cnx.close())

    def _fail_op(self, op: OpSend, err: BaseException) -> None:
        for m in op.messages:
            _resolve(m, None, err)
        self._release(op.num_counted)

    def _release(self, n: int) -> None:
        self._in_flight -= n
        if self._in_flight < self.conf.max_pending_messages:
            self._space.set()

    def _fail_all(self, err: BaseException) -> None:
        self.flush_batch()
        while self.pending:
            self._fail_op(self.pending.popleft(), err)

    def _fail(self, err: PulsarException) -> None:
        self._failed = err
        self._ready = False
        self._fail_all(err)

    def _drop_transactional(self) -> None:
        """A transactional send cut off by a reconnect is failed, not re-sent: its transaction
        must abort (it may or may not be stored; without deduplication a resend could store it
        twice inside one committed transaction)."""
        if not any(op.messages and op.messages[0].txnid is not None for op in self.pending):
            return
        keep: deque[OpSend] = deque()
        for op in self.pending:
            if op.messages and op.messages[0].txnid is not None:
                self._fail_op(op, PulsarException(f"connection to {self.topic} lost during a transactional send"))
            else:
                keep.append(op)
        self.pending = keep

    # ------------------------------------------------------------------ reconnect
    def connection_closed(self, cnx: ClientCnx) -> None:
        if cnx is self._cnx:
            self._lost_connection()

    def _lost_connection(self) -> None:
        self._ready = False
        if self._cnx is not None:
            self._cnx.remove_producer(self.producer_id)
        self._cnx = None
        if self._closed or self._failed is not None:
            return
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = Backoff(BackoffConfig(100, 30_000), Rng())
        while not self._closed:
            await asyncio.sleep(backoff.next_s())
            self._epoch += 1
            try:
                await self._connect_once()
                return
            except PulsarException as exc:
                if getattr(exc, "code", None) in _FATAL:
                    self._fail(exc)
                    return
                log.info("%s: reconnect failed (%s); retrying", self.topic, exc)
            except (TimeoutError, OSError) as exc:
                log.info("%s: reconnect failed (%s); retrying", self.topic, exc)

    async def _timeout_loop(self) -> None:
        limit = self.conf.send_timeout_ms / 1000.0
        while not self._closed:
            await asyncio.sleep(min(1.0, max(0.05, limit / 4)))
            if self.pending and time.monotonic() - self.pending[0].created_s > limit:
                self._fail_all(Timeout(f"send to {self.topic} not acknowledged in {limit} s"))

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.flush(), self.conf.send_timeout_ms / 1000.0 or None)
        self._closed = True
        self._space.set()
        for task in (self._reconnect_task, self._timeout_task):
            if task is not None:
                task.cancel()
        cnx, self._cnx = self._cnx, None
        if cnx is not None and not cnx.is_closed:
            with contextlib.suppress(PulsarException):
                await cnx.request(T.CLOSE_PRODUCER, lambda rid: _close_producer(self.producer_id, rid))
            cnx.remove_producer(self.producer_id)
        self._fail_all(AlreadyClosed(f"producer on {self.topic} closed"))


def _close_producer(producer_id: int, request_id: int) -> bytes:
    from magnetar.protocol.server_commands import close_producer

    return close_producer(producer_id, request_id)


def _resolve(m: OutgoingMessage, mid: MessageId | None, err: BaseException | None) -> None:
    if m.on_done is not None:
        m.on_done(len(m.payload))
        m.on_done = None
    fut = m.future
    if fut.done():
        return  # e.g. the other chunks of a chunked message that already failed
    if err is not None:
        fut.set_exception(err)
        if m.callback is not None:
            fut.exception()  # the callback reports it: no "never retrieved" warning
    else:
        fut.set_result(mid)
    if m.callback is not None:
        try:
            m.callback(err, mid)
        except Exception:
            log.exception("send callback failed")
