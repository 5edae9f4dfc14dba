"""A WebSocket producer session: JSON publish frames in, one ack frame per message out.

Theory of operation: the session owns a :class:`BrokerLink` with one broker
producer per partition (one for a non-partitioned topic), all under the same
producer name.  Each text frame is parsed (bad JSON -> ``send-error:3``, bad
base64 or eventTime -> ``send-error:7``; the connection stays open, as
Pulsar's does), routed to a partition and stored -- as Pulsar's WebSocket
service does with the producer it builds from the query string:

* routing: a keyed message goes to ``hash(key) % partitions`` with
  ``hashingScheme`` (``JavaStringHash``, the Java builder's default, or
  ``Murmur3_32Hash``); a keyless one by ``messageRoutingMode``:
  ``RoundRobinPartition`` (the builder's default; ``CustomPartition`` is
  ignored as Pulsar ignores it) rotates per message, or per
  ``batchingMaxPublishDelay`` window when batching so that batches fill;
  ``SinglePartition`` picks one partition at random for the session;
* ``batchingEnabled``: messages of one partition collect in an open batch
  that is stored as one entry (records in SingleMessageMetadata, sequence ids
  first..highest) when it holds ``batchingMaxMessages`` messages or
  ``BATCH_MAX_BYTES``, or ``batchingMaxPublishDelay`` ms after the first batch
  opened (one timer task flushes every open batch).  A message with a delivery
  time or replication clusters goes alone, after the open batch, as the Java
  client does;
* ``compressionType`` compresses each entry's payload (the whole batch);
* ``maxPendingMessages``: more unanswered messages than that get an error ack
  at once (no blocking), as a producer with ``blockIfQueueFull=false``.

Acks go back in send order: every publish takes a slot in a FIFO and the
front is written as soon as it is resolved -- the broker completes adds per
partition in order, the FIFO keeps the order across partitions.  A batched
message's ack carries its ``batch_index``/``batch_size`` in the message id,
the bytes the official client's ``MessageId.serialize()`` gives for it.  A
message not stored within ``sendTimeoutMillis`` is answered ``send-error:8``.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from magnetar.broker import errors
from magnetar.broker.service.api import WebBrokerView
from magnetar.common.key_hash import java_string_hash, murmur3_hash
from magnetar.protocol.enums import CompressionType
from magnetar.protocol.message_id import MessageId
from magnetar.web.websocket import codec
from magnetar.web.websocket.broker_link import BrokerLink
from magnetar.web.websocket.session import BadParameter, QueryParams, Session

BATCH_MAX_BYTES = 128 * 1024  # Pulsar's batchingMaxBytes default
_HASHES: dict[str, Callable[[str], int]] = {
    "JavaStringHash": java_string_hash,
    "Murmur3_32Hash": murmur3_hash,
}


@dataclass
class _Pending:
    context: str | None
    created: float
    result: dict[str, Any] | None = None


@dataclass
class _InFlight:
    """One stored entry on its way: its messages' ack slots, in batch order."""

    pendings: list[_Pending]
    batched: bool
    created: float


@dataclass
class _Batch:
    msgs: list[codec.OutgoingMessage] = field(default_factory=list)
    pendings: list[_Pending] = field(default_factory=list)
    size_bytes: int = 0


class ProducerSession(Session):
    def __init__(self, ws: WebSocket, service: WebBrokerView, topic: str, params: QueryParams) -> None:
        super().__init__(ws, service, topic, params)
        self.name = params.text("producerName")
        self.send_timeout_ms = params.integer("sendTimeoutMillis", 30_000)
        self.max_pending = max(1, params.integer("maxPendingMessages", 1000))
        self.batching = params.boolean("batchingEnabled", False)
        self.batch_max_messages = params.integer("batchingMaxMessages", 1000)
        self.batch_delay_ms = params.integer("batchingMaxPublishDelay", 10)
        if self.batch_max_messages <= 0 or self.batch_delay_ms < 0:
            raise BadParameter("batchingMaxMessages must be > 0 and batchingMaxPublishDelay >= 0")
        routing = params.choice(
            "messageRoutingMode", ("SinglePartition", "RoundRobinPartition", "CustomPartition"), None
        )
        self.single_partition = routing == "SinglePartition"
        compression = params.choice("compressionType", ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"), "NONE")
        self.compression = int(CompressionType[compression or "NONE"])
        scheme = params.choice("hashingScheme", tuple(_HASHES), "JavaStringHash")
        self.hash = _HASHES[scheme or "JavaStringHash"]
        if params.text("encryptionKeys"):
            raise BadParameter(
                "encryptionKeys is not supported: no cryptoKeyReaderFactoryClassName is configured"
            )
        self.sequence = itertools.count(max(0, params.integer("initialSequenceId", -1) + 1))
        self._producers: list[int] = []  # producer id per partition
        self._pending: deque[_Pending] = deque()  # ack slots in send order
        self._in_flight: dict[int, _InFlight] = {}  # by the entry's (first) sequence id
        self._batches: dict[int, _Batch] = {}  # open batch per partition index
        self._batch_armed = asyncio.Event()
        self._round_robin = itertools.count()
        self._start = 0
        self._producer_name = ""

    async def open(self, link: BrokerLink) -> None:
        info = await link.topic_info(self.topic)
        names = (
            [info.full_name]
            if info.partitions == 0
            else [f"{info.full_name}-partition-{i}" for i in range(info.partitions)]
        )
        name = self.name
        for topic in names:
            pid, name = await link.create_producer(topic, name)
            self._producers.append(pid)
        self._producer_name = name or ""
        self._start = random.randrange(len(self._producers))
        self.spawn(self._timeouts())
        if self.batching:
            self.spawn(self._batch_timer())

    async def on_text(self, text: str) -> None:
        now_ms = self.clock.time_ms()
        context = None
        try:
            frame = codec.parse_json_object(text)
            context = None if frame.get("context") is None else str(frame.get("context"))
            msg = codec.parse_publish(frame, now_ms)
        except codec.FrameError as exc:
            self._answer_now(context, exc.code, exc.message)
            return
        if len(self._pending) >= self.max_pending:
            self._answer_now(msg.context, codec.UNKNOWN_ERROR, "Producer queue is full")
            return
        pending = _Pending(msg.context, self.clock.monotonic())
        self._pending.append(pending)
        index = self._route(msg.key, now_ms)
        if self.batching and msg.deliver_at is None and msg.replicate_to is None:
            batch = self._batches.setdefault(index, _Batch())
            batch.msgs.append(msg)
            batch.pendings.append(pending)
            batch.size_bytes += len(msg.payload)
            self._batch_armed.set()
            if len(batch.msgs) >= self.batch_max_messages or batch.size_bytes >= BATCH_MAX_BYTES:
                self._flush_batch(index)
            return
        self._flush_batch(index)  # an open batch of that partition goes first: order is kept
        seq = next(self.sequence)
        self._in_flight[seq] = _InFlight([pending], False, pending.created)
        data = codec.entry_bytes(msg, self._producer_name, seq, now_ms, self.compression)
        assert self.link is not None
        self.link.publish(self._producers[index], seq, data)

    def _route(self, key: str | None, now_ms: int) -> int:
        n = len(self._producers)
        if n == 1:
            return 0
        if key is not None:
            return self.hash(key) % n
        if self.single_partition:
            return self._start
        if self.batching:
            return (self._start + now_ms // max(1, self.batch_delay_ms)) % n
        return (self._start + next(self._round_robin)) % n

    def _flush_batch(self, index: int) -> None:
        batch = self._batches.pop(index, None)
        if batch is None or not batch.msgs:
            return
        first = next(self.sequence)
        for _ in range(len(batch.msgs) - 1):
            next(self.sequence)
        now = self.clock.monotonic()
        self._in_flight[first] = _InFlight(batch.pendings, True, now)
        data = codec.batch_entry_bytes(
            batch.msgs, self._producer_name, first, self.clock.time_ms(), self.compression
        )
        assert self.link is not None
        highest = first + len(batch.msgs) - 1
        self.link.publish(self._producers[index], first, data, len(batch.msgs), highest)

    async def _batch_timer(self) -> None:
        while True:
            await self._batch_armed.wait()
            await self.clock.sleep(self.batch_delay_ms / 1000)
            self._batch_armed.clear()
            for index in list(self._batches):
                self._flush_batch(index)

    def _answer_now(self, context: str | None, code: int, message: str) -> None:
        pending = _Pending(context, self.clock.monotonic())
        pending.result = _error(code, message, context)
        self._pending.append(pending)
        self._flush()

    # --- broker callbacks (LinkListener) -----------------------------------------------------
    def on_receipt(self, sequence_id: int, ledger_id: int, entry_id: int, partition: int) -> None:
        entry = self._in_flight.pop(sequence_id, None)
        if entry is None:
            return
        size = len(entry.pendings)
        for i, pending in enumerate(entry.pendings):
            mid = (
                MessageId(ledger_id, entry_id, partition, i, size)
                if entry.batched
                else MessageId(ledger_id, entry_id, partition)
            )
            pending.result = {"result": "ok", "messageId": codec.encode_message_id(mid)}
            if pending.context is not None:
                pending.result["context"] = pending.context
        self._flush()

    def on_send_failed(self, sequence_id: int, error: errors.BrokerError) -> None:
        entry = self._in_flight.pop(sequence_id, None)
        if entry is None:
            return
        for pending in entry.pendings:
            pending.result = _error(codec.UNKNOWN_ERROR, error.message, pending.context)
        self._flush()

    def _flush(self) -> None:
        while self._pending and self._pending[0].result is not None:
            self.send_json(self._pending.popleft().result)

    async def _timeouts(self) -> None:
        if self.send_timeout_ms <= 0:
            return
        limit_s = self.send_timeout_ms / 1000
        while True:
            await self.clock.sleep(min(1.0, limit_s))
            now = self.clock.monotonic()
            expired = [s for s, e in self._in_flight.items() if now - e.created >= limit_s]
            for seq in expired:
                for pending in self._in_flight.pop(seq).pendings:
                    pending.result = _error(
                        codec.UNKNOWN_ERROR,
                        "Could not send message to broker within given timeout",
                        pending.context,
                    )
            if expired:
                self._flush()


def _error(code: int, message: str, context: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"result": f"send-error:{code}", "errorMsg": message, "errorCode": code}
    if context is not None:
        out["context"] = context
    return out
