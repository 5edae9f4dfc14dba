"""Multi-consumer dispatch: Shared subscriptions.

Theory of operation: entries go round-robin to the consumers that have
permits and are not blocked on unacked messages -- among those, only the ones
at the best (lowest) ``priority_level``, so lower-priority consumers get
messages only while the better ones have no permits (as Java does) -- up to
``dispatcherMaxRoundRobinBatchSize`` entries to one consumer before moving
to the next (Java's batching of round-robin).  Reads are sized by the total
permits of available consumers.  The subscription as a whole stops
dispatching while its unacked messages exceed
``maxUnackedMessagesPerSubscription``.  Entries that no consumer can take
(all ran out of permits meanwhile) are queued for redelivery without counting
as a redelivery.
"""

from __future__ import annotations

from magnetar.broker.service.admission import unacked_limit_on_subscription
from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.dispatcher_base import Dispatcher


class MultiConsumerDispatcher(Dispatcher):
    def __init__(self, subscription, sub_type: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(subscription, sub_type)
        self._next = 0
        cfg = subscription.topic.config
        self._rr_batch = max(1, cfg.dispatcher_max_round_robin_batch_size)
        self._max_unacked = cfg.max_unacked_messages_per_subscription

    def _sub_blocked(self) -> bool:
        limit = unacked_limit_on_subscription(self.subscription.topic, self._max_unacked)  # policy
        if limit <= 0:
            return False
        return sum(c.unacked_messages for c in self.consumers) >= limit

    def read_budget(self) -> int:
        if self._sub_blocked():
            return 0
        return sum(c.permits for c in self.consumers if c.available)

    def _next_consumer(self) -> Consumer | None:
        """Round-robin among the available consumers of the best (lowest) priority level."""
        available = [c for c in self.consumers if c.available]
        if not available:
            return None
        best = min(c.priority_level for c in available)
        candidates = [c for c in available if c.priority_level == best]
        chosen = candidates[self._next % len(candidates)]
        self._next += 1
        return chosen

    def deliver(self, entries: list[OutboundEntry]) -> None:
        now = self.now_ms()
        i = 0
        while i < len(entries):
            c = self._next_consumer()
            if c is None:
                break
            chunk: list[OutboundEntry] = []
            budget = c.permits
            while i < len(entries) and len(chunk) < self._rr_batch and budget > 0:
                chunk.append(entries[i])
                budget -= entries[i].num_messages
                i += 1
            self.send_to(c, chunk, now)
        if i < len(entries):
            self.requeue([e.entry.position for e in entries[i:]])
