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
(as Java does).  A consumer's REDELIVER without ids (nack, ack timeout on
Exclusive/Failover) rewinds the same way.  The switch of dispatch happens at once; Java's 1 s
``activeConsumerFailoverDelayTimeMillis`` only delays reads, which we skip.
"""

from __future__ import annotations

import bisect

from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.dispatcher_base import Dispatcher
from magnetar.common.murmur3 import pulsar_hash

SUB_FAILOVER = 2
RING_POINTS = 100


class SingleActiveConsumerDispatcher(Dispatcher):
    def __init__(self, subscription, sub_type: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(subscription, sub_type)
        self.active: Consumer | None = None
        self._told: set[int] = set()  # id() of consumers that know who is active

    def consumers_changed(self) -> None:
        new = self._pick_active()
        old = self.active
        if new is old:
            # A newcomer still needs to learn who is active.
            if self.sub_type == SUB_FAILOVER and new is not None:
                for c in self.consumers:
                    if id(c) not in self._told:
                        self._tell(c, c is new)
            return
        self.active = new
        if old is not None:
            # What the old active consumer had in flight goes to the new one (a rewind).
            self.rewind(old.take_pending())
        if self.sub_type == SUB_FAILOVER:
            for c in self.consumers:
                self._tell(c, c is new)

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
        c = self.active
        if c is None or not c.available:
            return 0
        return c.permits

    def deliver(self, entries: list[OutboundEntry]) -> None:
        c = self.active
        if c is None or c.closed:
            self.requeue([e.entry.position for e in entries])
            return
        c.send(entries, self.now_ms())


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
