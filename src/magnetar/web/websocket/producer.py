"""A WebSocket producer session: JSON publish frames in, one ack frame per message out.

Theory of operation: the session owns a :class:`BrokerLink` with one broker
producer per partition (one for a non-partitioned topic), all under the same
producer name.  Each text frame is parsed (bad JSON -> ``send-error:3``, bad
base64 or eventTime -> ``send-error:7``; the connection stays open, as
Pulsar's does), routed (the key's Murmur3 hash, else round robin), framed as
a stored entry and handed to the link.  Acks go back in send order: every
publish takes a slot in a FIFO and the front is written as soon as it is
resolved -- the broker already completes adds per partition in order, the
FIFO keeps the order across partitions too.  More than ``maxPendingMessages``
unresolved publishes answer an error ack at once (no blocking), as Pulsar's
producer with ``blockIfQueueFull=false`` does; a message not stored within
``sendTimeoutMillis`` is answered ``send-error:8`` (timeout).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fastapi import WebSocket

from magnetar.broker import errors
from magnetar.common.murmur3 import pulsar_hash
from magnetar.protocol.message_id import MessageId
from magnetar.web.websocket import codec
from magnetar.web.websocket.broker_link import BrokerLink
from magnetar.web.websocket.session import BadParameter, QueryParams, Session


@dataclass
class _Pending:
    context: str | None
    created: float
    result: dict[str, Any] | None = None
    partitions: dict[int, int] = field(default_factory=dict)


class ProducerSession(Session):
    def __init__(self, ws: WebSocket, service: Any, topic: str, params: QueryParams) -> None:
        super().__init__(ws, service, topic, params)
        self.name = params.text("producerName")
        self.send_timeout_ms = params.integer("sendTimeoutMillis", 30_000)
        self.max_pending = params.integer("maxPendingMessages", 1000)
        params.boolean("batchingEnabled", False)  # accepted: each WebSocket message is one entry
        params.integer("batchingMaxMessages", 1000)
        params.integer("batchingMaxPublishDelay", 10)
        params.choice(
            "messageRoutingMode", ("SinglePartition", "RoundRobinPartition", "CustomPartition"), None
        )
        params.choice("compressionType", ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"), None)
        params.choice("hashingScheme", ("JavaStringHash", "Murmur3_32Hash"), None)
        if params.text("encryptionKeys"):
            raise BadParameter(
                "encryptionKeys is not supported: no cryptoKeyReaderFactoryClassName is configured"
            )
        self.sequence = itertools.count(max(0, params.integer("initialSequenceId", -1) + 1))
        self._producers: list[int] = []  # producer id per partition
        self._pending: deque[_Pending] = deque()
        self._by_seq: dict[int, _Pending] = {}
        self._round_robin = itertools.count()
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
        self.spawn(self._timeouts())

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
        seq = next(self.sequence)
        pending = _Pending(msg.context, self.clock.monotonic())
        self._pending.append(pending)
        self._by_seq[seq] = pending
        index = self._route(msg.key)
        data = codec.entry_bytes(msg, self._producer_name, seq, now_ms)
        assert self.link is not None
        self.link.publish(self._producers[index], seq, data)

    def _route(self, key: str | None) -> int:
        n = len(self._producers)
        if n == 1:
            return 0
        if key is not None:
            return pulsar_hash(key) % n
        return next(self._round_robin) % n

    def _answer_now(self, context: str | None, code: int, message: str) -> None:
        pending = _Pending(context, self.clock.monotonic())
        pending.result = _error(code, message, context)
        self._pending.append(pending)
        self._flush()

    # --- broker callbacks (LinkListener) -----------------------------------------------------
    def on_receipt(self, sequence_id: int, ledger_id: int, entry_id: int, partition: int) -> None:
        pending = self._by_seq.pop(sequence_id, None)
        if pending is None:
            return
        pending.result = {
            "result": "ok",
            "messageId": codec.encode_message_id(MessageId(ledger_id, entry_id, partition)),
        }
        if pending.context is not None:
            pending.result["context"] = pending.context
        self._flush()

    def on_send_failed(self, sequence_id: int, error: errors.BrokerError) -> None:
        pending = self._by_seq.pop(sequence_id, None)
        if pending is None:
            return
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
            expired = [s for s, p in self._by_seq.items() if now - p.created >= limit_s]
            for seq in expired:
                pending = self._by_seq.pop(seq)
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
