"""Non-persistent topics: in memory, to connected consumers only, dropped when they cannot take it.

Theory of operation
-------------------
A ``non-persistent://`` topic has no managed ledger.  A SEND is handed at
once to every subscription and answered with message id (-1, -1), as Java
answers.  Each subscription picks one consumer -- Exclusive/Failover the
first by (priority level, name), Shared round-robin among consumers with
permits, Key_Shared the owner of the key's slot on a consistent-hash ring --
and writes the MESSAGE if that consumer has permits and a writable
connection; otherwise the message is *dropped* for that subscription and
counted (``msgDropRate``/``msgDropCount`` in its stats, as Java reports
drops for non-persistent subscriptions).  Nothing is retained: a consumer
connecting later sees only later messages, acks are accepted and ignored,
and there is no redelivery.  Messages carry ids ``(0, n)`` with ``n``
counting per topic, so clients never see two messages with the same id.

The topic shares :class:`BaseTopic` with the persistent topic: producers
(access modes, names, limits), the state machine, policies and idle
tracking, and the storage facts shared code asks of a topic, answered as for
a topic that stores nothing (no cursors, no entries, never terminated).  A
subscription's cursor is :class:`_NoCursor` (nothing acknowledged, no
backlog), what stats and admin read of it.  The registry creates these topics on demand (they exist while loaded;
the inactive-topic sweep unloads them): ``TopicRegistry._get_non_persistent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from magnetar.broker import errors
from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.key_shared_selector import ConsistentHashingSelector, slot_of_metadata
from magnetar.broker.service.names import TopicRef
from magnetar.broker.service.rates import Rate
from magnetar.broker.service.topic_base import BaseTopic, TopicState
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.enums import SubType
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import num_messages, peek_metadata

NO_POSITION = Position(-1, -1)
NP_LEDGER_ID = 0


class _NoCursor:
    mark_delete_position = NO_POSITION
    read_position = NO_POSITION

    def number_of_entries_in_backlog(self) -> int:
        return 0

    def individually_deleted_ranges(self) -> list:
        return []


class NonPersistentSubscription:
    def __init__(self, topic: NonPersistentTopic, name: str, durable: bool) -> None:
        self.topic = topic
        self.name = name
        self.durable = durable
        self.cursor = _NoCursor()
        self.sub_type: int | None = None
        self._consumers: list[Consumer] = []
        self._selector: ConsistentHashingSelector | None = None
        self._rr = 0
        self.closed = False
        self.dispatcher = None
        self.drop_count = 0
        self.rate_drop = Rate()
        self._drop_sampled_ms = topic.clock.time_ms()

    @property
    def consumers(self) -> list[Consumer]:
        return list(self._consumers)

    def add_consumer(self, consumer: Consumer) -> None:
        if self.closed:
            raise errors.TopicFencedError("Subscription is closed")
        if self._consumers:
            if consumer.sub_type != self.sub_type:
                raise errors.ConsumerBusyError("Subscription is of different type")
            if consumer.sub_type == SubType.Exclusive:
                raise errors.ConsumerBusyError("Exclusive consumer is already connected")
        else:
            self.sub_type = consumer.sub_type
            self._selector = ConsistentHashingSelector() if consumer.sub_type == SubType.Key_Shared else None
        if self._selector is not None:
            self._selector.add_consumer(consumer)
        self._consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if consumer in self._consumers:
            self._consumers.remove(consumer)
            if self._selector is not None:
                self._selector.remove_consumer(consumer)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits, self.topic.clock.time_ms())

    async def ack_individual(self, consumer: Consumer, acks: Any) -> None:
        consumer.acked([pos for pos, _ in acks], self.topic.clock.time_ms())

    async def ack_cumulative(self, consumer: Consumer, position: Position, ack_set: Any) -> None:
        consumer.acked_up_to(position, self.topic.clock.time_ms())

    def redeliver_unacknowledged(self, consumer: Consumer, positions: Any) -> None:
        consumer.take_pending(positions)  # nothing is kept to redeliver

    async def reset_to(self, position: Position) -> None:
        raise errors.NotAllowedError("Seek is not allowed on a non-persistent topic")

    async def close(self) -> None:
        self.closed = True

    def backlog(self) -> int:
        return 0

    # ------------------------------------------------------------ dispatch
    def _pick(self, entry: Entry) -> Consumer | None:
        live = [c for c in self._consumers if not c.closed]
        if not live:
            return None
        if self.sub_type == SubType.Key_Shared and self._selector is not None:
            try:
                slot = slot_of_metadata(peek_metadata(entry.data))
            except CorruptPayload:
                slot = 1
            owner = self._selector.select(slot)
            return owner if owner is not None and owner.available else None
        if self.sub_type == SubType.Shared:
            for i in range(len(live)):
                c = live[(self._rr + i) % len(live)]
                if c.available:
                    self._rr = (self._rr + i + 1) % len(live)
                    return c
            return None
        best = min(live, key=lambda c: (c.priority_level, c.consumer_name))
        return best if best.available else None

    def dispatch(self, entry: Entry, n_messages: int) -> None:
        consumer = self._pick(entry)
        if consumer is None:
            self.drop_count += n_messages
            self.topic.msg_drop_count += n_messages
            return
        consumer.send([OutboundEntry(entry, n_messages)], self.topic.clock.time_ms())
        consumer.acked([entry.position], self.topic.clock.time_ms())  # nothing to track

    def to_stats(self) -> dict:
        consumers = self.consumers
        now = self.topic.clock.time_ms()
        if now - self._drop_sampled_ms >= 1000:
            self.rate_drop.sample(self.drop_count, 0, (now - self._drop_sampled_ms) / 1000)
            self._drop_sampled_ms = now
        return {
            "msgRateOut": sum(c.rate_out.msg_rate for c in consumers),
            "msgThroughputOut": sum(c.rate_out.byte_rate for c in consumers),
            "bytesOutCounter": sum(c.bytes_out_counter for c in consumers),
            "msgOutCounter": sum(c.msg_out_counter for c in consumers),
            "msgBacklog": 0,
            "msgBacklogNoDelayed": 0,
            "unackedMessages": 0,
            "type": {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}.get(self.sub_type or 0),
            "msgDropRate": self.rate_drop.msg_rate,
            "msgDropCount": self.drop_count,
            "consumers": [c.to_stats() for c in consumers],
            "isDurable": False,
            "durable": False,
            "isReplicated": False,
            "replicated": False,
            "blockedSubscriptionOnUnackedMsgs": False,
        }


class NonPersistentTopic(BaseTopic):
    def __init__(self, ref: TopicRef, config: Any, clock: Any, supervisor: Any) -> None:
        super().__init__(ref, config, clock, supervisor)
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self._next_entry_id = 0
        self.msg_drop_count = 0

    def add_entry(
        self,
        producer: Any,
        data: bytes,
        n_messages: int,
        is_batch: bool,
        txnid: Any = None,
        metadata: Any = None,
        on_done: Callable[[Position | None, BaseException | None], None] | None = None,
    ) -> None:
        """Hand the entry to the subscriptions now; ``on_done`` hears of it soon (as the
        future this returned once did: receipts after the dispatch)."""
        assert on_done is not None
        loop = asyncio.get_running_loop()
        if self.state is not TopicState.ACTIVE:
            loop.call_soon(on_done, None, errors.TopicFencedError(f"Topic {self.name} is closing"))
            return
        try:
            n = num_messages(peek_metadata(data))
        except CorruptPayload:
            n = max(1, n_messages)
        entry = Entry(Position(NP_LEDGER_ID, self._next_entry_id), data)
        self._next_entry_id += 1
        for sub in list(self.subscriptions.values()):
            sub.dispatch(entry, n)
        self.msg_in_counter += n
        self.bytes_in_counter += len(data)
        self.last_publish_ms = self.clock.time_ms()
        loop.call_soon(on_done, NO_POSITION, None)

    async def get_or_create_subscription(
        self, name: str, initial_position: int, durable: bool, start: Position | None
    ) -> NonPersistentSubscription:
        self.check_active()
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = NonPersistentSubscription(self, name, durable)
            self.subscriptions[name] = sub
        return sub

    async def remove_consumer(self, consumer: Consumer) -> None:
        sub = consumer.subscription
        sub.remove_consumer(consumer)
        if not sub.consumers and self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]  # nothing to keep: the subscription ends with its consumers
            await sub.close()

    async def unsubscribe(self, sub: NonPersistentSubscription) -> None:
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
        await sub.close()

    async def last_message_id(self) -> tuple[Position, int]:
        return NO_POSITION, -1

    async def close(self, *, delete: bool = False) -> None:
        if self.state is not TopicState.ACTIVE:
            return
        self._set_state(TopicState.CLOSING)
        await self._close_clients()
        for sub in list(self.subscriptions.values()):
            await sub.close()
        self.subscriptions.clear()
        self._set_state(TopicState.DELETED if delete else TopicState.CLOSED)
