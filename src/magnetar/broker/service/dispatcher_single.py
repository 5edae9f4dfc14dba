"""Single-active-consumer dispatch: Exclusive and Failover subscriptions.

Theory of operation: exactly one consumer receives messages.  For Exclusive
there is only ever one consumer.  For Failover the active one is chosen as
Pulsar does (``AbstractDispatcherSingleActiveConsumer``): sort consumers by
priority level (lower first) then by name, keep those at the best level, and
take ``sorted[partitionIndex % n]`` on a partition of a partitioned topic.
On a non-partitioned topic Java hashes consumer names onto a ring (Murmur3,
100 points each) and takes the first point at or after the topic's hash; we
use the same rule.  When the active consumer changes, every consumer gets
ACTIVE_CONSUMER_CHANGE and the cursor is rewound to the mark-delete
position, so what the old active one had not acknowledged goes to the new one
(as Java does).  When the old active consumer is still connected (a better
one joined), dispatch pauses for ``activeConsumerFailoverDelayTimeMillis``
first, so acks it still sends are not followed by duplicates.  A consumer's
REDELIVER without ids (nack, ack timeout on Exclusive/Failover) rewinds the
same way."""

from __future__ import annotations

import bisect

from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.dispatcher_base import Dispatcher
from magnetar.common.murmur3 import pulsar_hash
from magnetar.protocol.enums import SubType
from magnetar.runtime import TimerHandle

RING_POINTS = 100


class SingleActiveConsumerDispatcher(Dispatcher):
    def __init__(self, subscription, sub_type: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(subscription, sub_type)
        self.active: Consumer | None = None
        self._told: set[int] = set()  # id() of consumers that know who is active
        self._delay_s = subscription.topic.config.active_consumer_failover_delay_time_millis / 1000
        self._paused = False  # during the failover grace period
        self._switch_timer: TimerHandle | None = None

    def consumers_changed(self) -> None:
        new = self._pick_active()
        old = self.active
        if new is old:
            # A newcomer still needs to learn who is active.
            if self.sub_type == SubType.Failover and new is not None:
                for c in self.consumers:
                    if id(c) not in self._told:
                        self._tell(c, c is new)
            return
        self.active = new
        if old is not None:
            # What the old active consumer had in flight goes to the new one (a rewind) --
            # after a grace period when the old one is still there and may yet ack it.
            if self.sub_type == SubType.Failover and not old.closed and new is not None and self._delay_s > 0:
                self._defer_switch(old)
            else:
                self.rewind(old.take_pending())
        if self.sub_type == SubType.Failover:
            for c in self.consumers:
                self._tell(c, c is new)

    def _defer_switch(self, old: Consumer) -> None:
        if self._switch_timer is not None:
            self._switch_timer.cancel()
        self._paused = True
        self._epoch += 1  # a read in flight for the old consumer is dropped
        clock = self.subscription.topic.clock
        self._switch_timer = clock.call_later(self._delay_s, lambda: self._finish_switch(old))

    def _finish_switch(self, old: Consumer) -> None:
        self._switch_timer = None
        self._paused = False
        if not self._closed:
            self.rewind(old.take_pending())

    async def close(self) -> None:
        if self._switch_timer is not None:
            self._switch_timer.cancel()
            self._switch_timer = None
        await super().close()

    def _tell(self, c: Consumer, is_active: bool) -> None:
        self._told.add(id(c))
        c.cnx.send_active_consumer_change(c.consumer_id, is_active)

    def remove_consumer(self, consumer: Consumer) -> None:
        self._told.discard(id(consumer))
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if consumer is not self.active:
            consumer.take_pending()
        self.consumers_changed()  # the active one leaving rewinds the cursor
        self.notify()

    def redeliver_all(self, consumer: Consumer) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES without ids: rewind to the mark-delete position."""
        self.rewind(consumer.take_pending())

    def _pick_active(self) -> Consumer | None:
        live = [c for c in self.consumers if not c.closed]
        if not live:
            return None
        best = min(c.priority_level for c in live)
        ranked = sorted((c for c in live if c.priority_level == best), key=lambda c: c.consumer_name)
        index = self.subscription.topic.partition_index
        if index >= 0:
            return ranked[index % len(ranked)]
        return _ring_pick(ranked, self.subscription.topic.name)

    def read_budget(self) -> int:
        if self._paused:
            return 0
        c = self.active
        if c is None or not c.available:
            return 0
        return c.permits

    def deliver(self, entries: list[OutboundEntry]) -> None:
        c = self.active
        if c is None or c.closed:
            self.requeue([e.entry.position for e in entries])
            return
        self.send_to(c, entries, self.now_ms())


def _ring_pick(ranked: list[Consumer], topic_name: str) -> Consumer:
    if len(ranked) == 1:
        return ranked[0]
    ring: list[tuple[int, int]] = []
    for idx, c in enumerate(ranked):
        for j in range(RING_POINTS):
            ring.append((pulsar_hash(f"{c.consumer_name}{j}".encode()), idx))
    ring.sort()
    h = pulsar_hash(topic_name.encode())
    i = bisect.bisect_left(ring, (h, -1))
    return ranked[ring[i % len(ring)][1]]
