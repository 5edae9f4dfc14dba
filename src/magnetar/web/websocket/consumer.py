"""WebSocket consumer and reader sessions: entries out as JSON frames, acks/permits in.

Theory of operation: the session subscribes one broker consumer per partition
through its :class:`BrokerLink`.  Every stored entry the broker dispatches is
split into message frames (one per batch record).  Flow control is counted
in messages, as Pulsar's service does: in push mode (default) at most
``receiverQueueSize`` (capped at 1000, 0 treated as 1) messages are out on the
socket without an ack/nack -- the broker gets permits for exactly the free
slots, and every ack or nack grants one more.  In pull mode only
``{"type":"permit","permitMessages":N}`` grants permits.

Acks name a message id (base64 ``MessageIdData``).  An entry is acknowledged
to the broker once every record of it was acked (a batch tracks its indexes).
``negativeAcknowledge`` redelivers the entry after
``negativeAckRedeliveryDelay``; ``ackTimeoutMillis`` redelivers what stays
unacked that long.  With ``maxRedeliverCount`` > 0 (dead-letter policy) an
entry delivered more than that many times is published to ``deadLetterTopic``
(default ``<topic>-<subscription>-DLQ``) and acknowledged instead of being
delivered again -- what Pulsar's client does for the WebSocket service.

Readers use a non-durable subscription starting at ``messageId``
(``earliest``, ``latest`` or a base64 id, exclusive: records at or before the
id are skipped); their acks only free a slot.  Unparseable JSON closes the
session (Pulsar's code 3, sent as close reason with status 1003).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from magnetar.broker.service.api import WebBrokerView
from magnetar.protocol.enums import SubType
from magnetar.web.websocket import codec
from magnetar.web.websocket.broker_link import BrokerLink
from magnetar.web.websocket.session import BadParameter, QueryParams, Session

MAX_RECEIVER_QUEUE = 1000
SUB_TYPES = {t.name: t for t in SubType}  # the query string names Pulsar's types
_reader_ids = itertools.count()


@dataclass
class _Entry:
    consumer_id: int
    remaining: set[int] = field(default_factory=set)  # batch indexes not yet acked (-1: single)
    delivered_at: float = 0.0
    redelivery: int = 0


class ConsumerSession(Session):
    reader = False

    def __init__(
        self, ws: WebSocket, service: WebBrokerView, topic: str, params: QueryParams, subscription: str
    ) -> None:
        super().__init__(ws, service, topic, params)
        self.subscription = subscription
        queue = params.integer("receiverQueueSize", 1000)
        self.queue_size = max(1, min(queue, MAX_RECEIVER_QUEUE))
        self.pull_mode = params.boolean("pullMode", False)
        self.ack_timeout_ms = params.integer("ackTimeoutMillis", 0)
        self.nack_delay_ms = params.integer("negativeAckRedeliveryDelay", 60_000)
        self.max_redeliver = params.integer("maxRedeliverCount", 0)
        self.dlq_topic = params.text("deadLetterTopic")
        self.consumer_name = params.text("consumerName", "") or ""
        self.priority = params.integer("priorityLevel", 0)
        params.choice("cryptoFailureAction", ("FAIL", "DISCARD", "CONSUME"), None)
        self.sub_type = SUB_TYPES[
            params.choice("subscriptionType", tuple(SUB_TYPES), "Exclusive") or "Exclusive"
        ]
        mode = params.choice("subscriptionMode", ("Durable", "NonDurable"), "Durable")
        self.durable = mode == "Durable"
        self._consumers: list[int] = []
        self._entries: dict[tuple[int, int, int], _Entry] = {}  # (consumer, ledger, entry)
        self._outstanding = 0  # messages on the socket without ack/nack (push mode)
        self._dlq_producer: tuple[int, str] | None = None
        self._start: Any = None

    # --- setup --------------------------------------------------------------------------------
    async def _topics(self, link: BrokerLink) -> list[str]:
        """The topic (partition) names this session subscribes to."""
        info = await link.topic_info(self.topic)
        if self.dlq_topic is None and self.max_redeliver > 0:
            self.dlq_topic = f"{info.full_name}-{self.subscription}-DLQ"
        if info.partitions == 0:
            return [info.full_name]
        return [f"{info.full_name}-partition-{i}" for i in range(info.partitions)]

    async def open(self, link: BrokerLink) -> None:
        for topic in await self._topics(link):
            cid = await self._subscribe(link, topic)
            self._consumers.append(cid)
        if not self.pull_mode:
            for cid in self._consumers:
                link.flow(cid, self.queue_size)
        if self.ack_timeout_ms > 0:
            self.spawn(self._ack_timeouts())

    async def _subscribe(self, link: BrokerLink, topic: str) -> int:
        return await link.subscribe(
            topic,
            self.subscription,
            self.sub_type,
            self.consumer_name,
            durable=self.durable,
            priority_level=self.priority,
        )

    # --- broker -> socket ---------------------------------------------------------------------
    def on_message(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, data: bytes, redelivery: int
    ) -> None:
        key = (consumer_id, ledger_id, entry_id)
        if self.max_redeliver > 0 and redelivery > self.max_redeliver:
            self.spawn(self._dead_letter(key, data))
            return
        messages = self._accept(codec.split_entry(data, ledger_id, entry_id, partition, redelivery))
        if not messages:
            self.spawn(self._ack_entry(key))
            return
        self._entries[key] = _Entry(
            consumer_id,
            {m.message_id.batch_index for m in messages},
            self.clock.monotonic(),
            redelivery,
        )
        for m in messages:
            self._outstanding += 1
            self.send_json(m.frame)

    def _accept(self, messages: list[codec.DeliveredMessage]) -> list[codec.DeliveredMessage]:
        return messages

    # --- socket -> broker ---------------------------------------------------------------------
    async def on_text(self, text: str) -> None:
        try:
            frame = codec.parse_json_object(text)
            kind = frame.get("type")
            if kind == "permit":
                await self._permit(frame)
            elif kind == "isEndOfTopic":
                assert self.link is not None
                self.send_json({"endOfTopic": all(self.link.is_end_of_topic(c) for c in self._consumers)})
            elif kind == "unsubscribe" and not self.reader:
                await self._unsubscribe()
            elif kind == "negativeAcknowledge":
                await self._nack(codec.decode_message_id(frame.get("messageId")))
            else:
                await self._ack(codec.decode_message_id(frame.get("messageId")))
        except codec.FrameError as exc:
            self.close_with(1003, f"{exc.code}: {exc.message}")

    async def _permit(self, frame: dict[str, Any]) -> None:
        n = frame.get("permitMessages")
        if not isinstance(n, int) or isinstance(n, bool):
            raise codec.FrameError(codec.FAILED_TO_DESERIALIZE_FROM_JSON, "Missing or invalid permitMessages")
        if not self.pull_mode:
            return  # Pulsar ignores permits in push mode
        assert self.link is not None
        for cid in self._consumers:
            self.link.flow(cid, n)

    def _entry_key(self, mid: Any) -> tuple[int, int, int] | None:
        for cid in self._consumers:
            key = (cid, mid.ledger_id, mid.entry_id)
            if key in self._entries:
                return key
        return None

    def _release_slot(self, consumer_id: int) -> None:
        if self._outstanding > 0:
            self._outstanding -= 1
        if not self.pull_mode and self.link is not None:
            self.link.flow(consumer_id, 1)

    async def _ack(self, mid: Any) -> None:
        key = self._entry_key(mid)
        if key is None:
            return  # unknown or already acked (Pulsar acks idempotently)
        entry = self._entries[key]
        index = mid.batch_index
        if index not in entry.remaining:
            return
        entry.remaining.discard(index)
        self._release_slot(entry.consumer_id)
        if not entry.remaining:
            await self._ack_entry(key)

    async def _ack_entry(self, key: tuple[int, int, int]) -> None:
        self._entries.pop(key, None)
        if not self.reader and self.link is not None:
            await self.link.ack(key[0], [(key[1], key[2])])

    async def _nack(self, mid: Any) -> None:
        key = self._entry_key(mid)
        if key is None:
            return
        entry = self._entries.pop(key)
        for _ in entry.remaining:
            self._release_slot(entry.consumer_id)
        self.spawn(self._redeliver_later(key, self.nack_delay_ms / 1000))

    async def _redeliver_later(self, key: tuple[int, int, int], delay_s: float) -> None:
        if delay_s > 0:
            await self.clock.sleep(delay_s)
        if self.link is not None:
            await self.link.redeliver(key[0], [(key[1], key[2])])

    async def _ack_timeouts(self) -> None:
        limit_s = self.ack_timeout_ms / 1000
        while True:
            await self.clock.sleep(min(1.0, max(0.05, limit_s / 4)))
            now = self.clock.monotonic()
            expired = [k for k, e in self._entries.items() if now - e.delivered_at >= limit_s]
            for key in expired:
                entry = self._entries.pop(key)
                for _ in entry.remaining:
                    self._release_slot(entry.consumer_id)
                await self._redeliver_later(key, 0)

    async def _dead_letter(self, key: tuple[int, int, int], data: bytes) -> None:
        assert self.link is not None and self.dlq_topic is not None
        if self._dlq_producer is None:
            self._dlq_producer = await self.link.create_producer(self.dlq_topic, None)
            self._dlq_seq = itertools.count()
        self._dlq_pending = getattr(self, "_dlq_pending", {})
        seq = next(self._dlq_seq)
        self._dlq_pending[seq] = key
        self.link.publish(self._dlq_producer[0], seq, data)

    def on_receipt(self, sequence_id: int, ledger_id: int, entry_id: int, partition: int) -> None:
        key = getattr(self, "_dlq_pending", {}).pop(sequence_id, None)
        if key is not None:  # stored in the dead-letter topic: acknowledge the original
            self._entries.pop(key, None)
            self.spawn(self._ack_entry(key))

    async def _unsubscribe(self) -> None:
        assert self.link is not None
        for cid in self._consumers:
            await self.link.unsubscribe(cid)
        self.close_with(1000, "unsubscribed")


class ReaderSession(ConsumerSession):
    reader = True

    def __init__(self, ws: WebSocket, service: WebBrokerView, topic: str, params: QueryParams) -> None:
        raw = dict(params.raw)
        raw.pop("subscriptionType", None)
        raw.pop("subscriptionMode", None)
        super().__init__(ws, service, topic, QueryParams(raw), f"reader-{next(_reader_ids):x}")
        self.consumer_name = params.text("readerName", "") or ""
        self.durable = False
        self.sub_type = SubType.Exclusive
        start = params.text("messageId", "latest") or "latest"
        if start in ("earliest", "latest"):
            self._start = start
        else:
            try:
                self._start = codec.decode_message_id(start)
            except codec.FrameError as exc:
                raise BadParameter(f"Invalid messageId: {exc.message}") from None

    async def _subscribe(self, link: BrokerLink, topic: str) -> int:
        from magnetar.protocol.message_id import EARLIEST, LATEST

        start = (
            {"earliest": EARLIEST, "latest": LATEST}.get(self._start)
            if isinstance(self._start, str)
            else (self._start.entry())
        )
        return await link.subscribe(
            topic,
            self.subscription,
            0,
            self.consumer_name,
            durable=False,
            start=start,
            initial_earliest=self._start == "earliest",
        )

    def _accept(self, messages: list[codec.DeliveredMessage]) -> list[codec.DeliveredMessage]:
        start = self._start
        if isinstance(start, str):
            return messages
        return [
            m
            for m in messages
            if m.message_id.entry() != start.entry()
            or (start.batch_index >= 0 and m.message_id.batch_index > start.batch_index)
        ]


class MultiTopicConsumerSession(ConsumerSession):
    """``/ws/v3/consumer/{subscription}?topics=a,b`` or ``?topicsPattern=<regex>``: one session
    over several topics (short names mean ``persistent://public/default/...``).  The route is
    open to any authenticated role, so consume permission is checked here, per topic."""

    def __init__(
        self, ws: WebSocket, service: WebBrokerView, params: QueryParams, subscription: str, role: str | None
    ):
        topics = [t.strip() for t in (params.text("topics") or "").split(",") if t.strip()]
        pattern = params.text("topicsPattern")
        if bool(topics) == bool(pattern):
            raise BadParameter("Exactly one of topics or topicsPattern is required")
        super().__init__(ws, service, topics[0] if topics else str(pattern), params, subscription)
        self.topic_list = [t if "://" in t else f"persistent://public/default/{t}" for t in topics]
        self.pattern = (
            pattern if pattern is None or "://" in pattern else f"persistent://public/default/{pattern}"
        )
        self.role = role

    async def _topics(self, link: BrokerLink) -> list[str]:
        names = list(self.topic_list)
        if self.pattern is not None:
            names = await link.topics_matching(self.pattern)
        out: list[str] = []
        for name in names:
            info = await link.topic_info(name)
            authz = self.service.authorization
            if authz.enabled:
                await authz.check_consume(self.role, info.full_name, self.subscription)
            if info.partitions == 0:
                out.append(info.full_name)
            else:
                out += [f"{info.full_name}-partition-{i}" for i in range(info.partitions)]
        if self.dlq_topic is None and self.max_redeliver > 0:
            self.dlq_topic = f"{self.topic_list[0] if self.topic_list else 'persistent://public/default/multi'}-{self.subscription}-DLQ"
        return out
