"""Multi-consumer dispatch: Shared subscriptions.

Theory of operation: entries go round-robin to the consumers that have
permits and are not blocked on unacked messages, up to
``dispatcherMaxRoundRobinBatchSize`` entries to one consumer before moving
to the next (Java's batching of round-robin).  Reads are sized by the total
permits of available consumers.  The subscription as a whole stops
dispatching while its unacked messages exceed
``maxUnackedMessagesPerSubscription``.  Entries that no consumer can take
(all ran out of permits meanwhile) are queued for redelivery without counting
as a redelivery.
"""

from __future__ import annotations

from magnetar.broker.service.consumer import OutboundEntry
from magnetar.broker.service.dispatcher_base import Dispatcher


class MultiConsumerDispatcher(Dispatcher):
    def __init__(self, subscription, sub_type: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(subscription, sub_type)
        self._next = 0
        cfg = subscription.topic.config
        self._rr_batch = max(1, cfg.dispatcher_max_round_robin_batch_size)
        self._max_unacked = cfg.max_unacked_messages_per_subscription

    def _sub_blocked(self) -> bool:
        if self._max_unacked <= 0:
            return False
        return sum(c.unacked_messages for c in self.consumers) >= self._max_unacked

    def read_budget(self) -> int:
        if self._sub_blocked():
            return 0
        return sum(c.permits for c in self.consumers if c.available)

    def deliver(self, entries: list[OutboundEntry]) -> None:
        now = self.now_ms()
        i = 0
        n = len(self.consumers)
        tried = 0
        while i < len(entries) and n and tried < n:
            c = self.consumers[self._next % n]
            self._next = (self._next + 1) % n
            if not c.available:
                tried += 1
                continue
            tried = 0
            chunk: list[OutboundEntry] = []
            budget = c.permits
            while i < len(entries) and len(chunk) < self._rr_batch and budget > 0:
                chunk.append(entries[i])
                budget -= entries[i].num_messages
                i += 1
            c.send(chunk, now)
        if i < len(entries):
            self.requeue([e.entry.position for e in entries[i:]])
