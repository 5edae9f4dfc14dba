"""The dispatch loop shared by every subscription type.

Theory of operation: one task per subscription moves entries from the cursor
to consumers.  It sleeps on a wake-up event that is set when something could
let it make progress: an entry was added to the topic, a consumer granted
permits or joined, messages were acknowledged (unblocking a consumer) or a
redelivery was requested.  Each round:

1. replay positions waiting for redelivery (sorted; they come before new
   entries so a rewound Exclusive consumer sees its messages in order);
2. otherwise read new entries from the cursor's read position, as many as
   the consumers have permits for (bounded by ``dispatcherMaxReadBatchSize``
   entries and ``dispatcherMaxReadSizeBytes``);
3. hand them to consumers -- which consumer is the subclass's business
   (single active consumer, or round-robin for Shared).  Entries read but not
   deliverable (a consumer vanished meanwhile) go back to the redelivery set.

Only this task reads the cursor, and every mutation of the redelivery set and
of consumers' in-flight maps happens on the event loop without awaiting in
between, so there is no lock.  Errors in a round (storage trouble) are logged
and retried after a back-off; they never kill the loop.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from typing import TYPE_CHECKING

from magnetar.broker.service.admission import count_dispatched, dispatch_permits
from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.delayed_delivery import tracker_for
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.payload import num_messages, peek_metadata

if TYPE_CHECKING:
    from magnetar.broker.service.subscription import Subscription

log = logging.getLogger(__name__)

READ_FAILURE_BACKOFF_S = (0.1, 0.5, 1.0, 5.0)
# Bounds the redelivery-count map: positions beyond this many are forgotten oldest-first.
MAX_TRACKED_REDELIVERIES = 1_000_000


class Dispatcher:
    def __init__(self, subscription: Subscription, sub_type: int) -> None:
        self.subscription = subscription
        self.sub_type = sub_type
        self.consumers: list[Consumer] = []
        self._redeliver: list[Position] = []  # sorted, unique
        self.redelivery_counts: dict[Position, int] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        cfg = subscription.topic.config
        self._max_read_entries = max(1, cfg.dispatcher_max_read_batch_size)
        self._max_read_bytes = max(1, cfg.dispatcher_max_read_size_bytes)
        self._track_redeliveries = cfg.subscription_redelivery_tracker_enabled
        # Bumped by reset(): entries read before a seek must not be delivered after it.
        self._epoch = 0
        self.delayed = tracker_for(self)  # delayed delivery (Shared, Key_Shared) or None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = self.subscription.topic.supervisor.spawn(
                self._run(), name=f"dispatch:{self.subscription.topic.name}:{self.subscription.name}"
            )

    async def close(self) -> None:
        self._closed = True
        if self.delayed is not None:
            self.delayed.close()
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    def notify(self) -> None:
        self._wake.set()

    # ------------------------------------------------------------ consumers
    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.consumers_changed()
        self.start()
        self.notify()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.redeliver(consumer.take_pending())
        self.consumers_changed()
        self.notify()

    def consumers_changed(self) -> None:
        """Hook for subclasses (active-consumer election)."""

    # ------------------------------------------------------------ redelivery
    def redeliver(self, positions: list[Position]) -> None:
        """Queue positions for redelivery, counting one more delivery for each."""
        for pos in positions:
            if self._track_redeliveries:
                self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
            i = bisect.bisect_left(self._redeliver, pos)
            if i == len(self._redeliver) or self._redeliver[i] != pos:
                self._redeliver.insert(i, pos)
        if len(self.redelivery_counts) > MAX_TRACKED_REDELIVERIES:
            for pos in sorted(self.redelivery_counts)[
                : len(self.redelivery_counts) - MAX_TRACKED_REDELIVERIES
            ]:
                del self.redelivery_counts[pos]
        if positions:
            self.notify()

    def rewind(self, counted: list[Position]) -> None:
        """Single-active redelivery (Java's cursor rewind): read again from the mark-delete position.

        ``counted`` are the in-flight positions we know of; each gets one more redelivery.
        A read in flight is dropped (epoch) so nothing older overtakes the rewind.
        """
        if self._track_redeliveries:
            for pos in counted:
                self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
        self._epoch += 1
        self._redeliver.clear()
        self.subscription.cursor.rewind()
        self.notify()

    def requeue(self, positions: list[Position]) -> None:
        """Put back positions read but not delivered (no extra redelivery count)."""
        for pos in positions:
            i = bisect.bisect_left(self._redeliver, pos)
            if i == len(self._redeliver) or self._redeliver[i] != pos:
                self._redeliver.insert(i, pos)

    def forget(self, positions: list[Position]) -> None:
        """Positions were acknowledged: no redelivery, no count."""
        for pos in positions:
            self.redelivery_counts.pop(pos, None)
            i = bisect.bisect_left(self._redeliver, pos)
            if i < len(self._redeliver) and self._redeliver[i] == pos:
                self._redeliver.pop(i)

    def forget_up_to(self, position: Position) -> None:
        i = bisect.bisect_right(self._redeliver, position)
        del self._redeliver[:i]
        for pos in [p for p in self.redelivery_counts if p <= position]:
            del self.redelivery_counts[pos]

    def reset(self) -> None:
        """After a seek: nothing pending survives, not even a read in flight."""
        self._epoch += 1
        self._redeliver.clear()
        self.redelivery_counts.clear()
        if self.delayed is not None:
            self.delayed.clear()

    @property
    def pending_redeliveries(self) -> int:
        return len(self._redeliver)

    # ------------------------------------------------------------ the loop
    async def _run(self) -> None:
        failures = 0
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            try:
                while not self._closed and await self._dispatch_once():
                    pass
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "dispatch failed on %s/%s", self.subscription.topic.name, self.subscription.name
                )
                delay = READ_FAILURE_BACKOFF_S[min(failures, len(READ_FAILURE_BACKOFF_S) - 1)]
                failures += 1
                await self.subscription.topic.clock.sleep(delay)
                self._wake.set()

    async def _dispatch_once(self) -> bool:
        """One read-and-send step; False when nothing more can be done now."""
        budget = self.read_budget()
        if budget <= 0:
            return False
        budget = await dispatch_permits(self.subscription, budget)  # dispatch rate (.admission)
        cursor = self.subscription.cursor
        epoch = self._epoch
        if self.delayed is not None:
            await self.delayed.before_round()
        if self._redeliver:
            positions = self._redeliver[:budget]
            del self._redeliver[: len(positions)]
            entries = await cursor.replay_entries(positions)
            if not entries:
                return True
        else:
            entries = await cursor.read_entries(min(budget, self._max_read_entries), self._max_read_bytes)
            if not entries:
                return False
            if self.delayed is not None and epoch == self._epoch:
                entries = self.delayed.filter(entries)
                if not entries:
                    return True
        if self._closed:
            return False
        if epoch != self._epoch:
            return True  # a seek happened while reading: drop what was read
        count_dispatched(self.subscription, len(entries), sum(len(e.data) for e in entries))
        self.deliver([self._outbound(e) for e in entries])
        return True

    def _outbound(self, entry: Entry) -> OutboundEntry:
        try:
            n = num_messages(peek_metadata(entry.data))
        except Exception:
            n = 1
        ack_set = self.subscription.cursor.get_ack_set(entry.position)
        return OutboundEntry(entry, n, self.redelivery_counts.get(entry.position, 0), ack_set)

    # ------------------------------------------------------------ strategy
    def read_budget(self) -> int:
        """How many entries may be read now (0: wait)."""
        raise NotImplementedError

    def deliver(self, entries: list[OutboundEntry]) -> None:
        raise NotImplementedError

    def now_ms(self) -> int:
        return self.subscription.topic.clock.time_ms()
