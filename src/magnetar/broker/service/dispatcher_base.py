"""The dispatch round shared by every subscription type, and the hooks each type overrides.

Theory of operation: one task per subscription moves entries from the cursor
to consumers.  It sleeps on a wake-up event that is set when something could
let it make progress: an entry was added to the topic, a consumer granted
permits or joined, messages were acknowledged (unblocking a consumer) or a
redelivery was requested.  There is exactly one round (:meth:`_dispatch_once`),
the same for Exclusive, Failover, Shared, Key_Shared, read_compacted and
delayed delivery:

1. *budget* -- :meth:`read_budget` (hook): how many messages the consumers
   can take now (0: sleep);
2. *rate limit* -- the topic's ``dispatchRate`` and the subscription's
   ``subscriptionDispatchRate`` (messages and bytes per second) cap the
   read, waiting for the next period when this one is spent (see
   :mod:`dispatch_rate`);
3. *read* -- :meth:`read_entries` (hook): by default the positions waiting
   for redelivery (sorted; they come before new entries so a rewound
   Exclusive consumer sees its messages in order), else new entries from the
   cursor's read position (bounded by ``dispatcherMaxReadBatchSize`` entries
   and ``dispatcherMaxReadSizeBytes``), filtered by the delayed-delivery
   tracker when the subscription has one.  Key_Shared replays only the
   parked entries whose owner can take them; read_compacted reads the
   compacted view;
4. *filter* -- a round whose read started before a seek or rewind (the
   epoch moved) delivers nothing;
5. *select and send* -- :meth:`deliver` (hook) picks the consumers (single
   active consumer, round-robin by priority, the owner of the key's slot)
   and hands each its batch through :meth:`send_to`, which counts the
   messages and bytes that really left; entries that cannot go now are put
   back (:meth:`requeue`) without counting a redelivery;
6. *count* -- what was sent is charged to the dispatch-rate windows, in
   messages (a batch entry counts all of its messages) and bytes.

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

from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.delayed_delivery import tracker_for
from magnetar.broker.service.dispatch_rate import DispatchRateLimiter
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.markers import REPLICATED_SUBSCRIPTION_MARKERS as SERVER_ONLY_MARKERS
from magnetar.protocol.payload import dispatch_facts

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
        self.rate = DispatchRateLimiter(subscription)  # dispatchRate, subscriptionDispatchRate
        self._sent = [0, 0, 0]  # this round's sends (send_to): entries, messages, bytes

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
        if not self._redeliver and not self.redelivery_counts:
            return  # the common case: nothing was ever redelivered
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
        """One round: budget, rate limit, read, filter, select and send, count.

        False when nothing more can be done now (the loop sleeps until woken)."""
        budget = self.read_budget()
        if budget <= 0:
            return False
        budget = await self.rate.entry_budget(budget)
        epoch = self._epoch
        if self.delayed is not None:
            await self.delayed.before_round()
        entries = await self.read_entries(budget, epoch)
        if entries is None or self._closed:
            return False
        if epoch != self._epoch:
            return True  # a seek or rewind happened while reading: drop what was read
        if not entries:
            return True  # progress without anything to send (all delayed, replay of acked entries)
        outbound: list[OutboundEntry] = []
        markers: list[Position] = []
        for e in entries:
            out = self._outbound(e)
            if out is None:
                markers.append(e.position)
            else:
                outbound.append(out)
        if markers:  # server-only markers (replicated subscriptions): acknowledged, never delivered
            await self.subscription.cursor.delete(markers)
            if not outbound or epoch != self._epoch:
                return True
        sent = self._sent = [0, 0, 0]
        self.deliver(outbound)
        if sent[0]:
            self.rate.charge(sent[0], sent[1], sent[2])
        return True

    # ------------------------------------------------------------ hooks of the round
    async def read_entries(self, budget: int, epoch: int) -> list[Entry] | None:
        """Step 3: what to offer the consumers this round (None: nothing to do now).

        Redeliveries first, then new entries through the delayed-delivery filter."""
        if self._redeliver:
            return await self.replay(self._redeliver[:budget], prefix=True)
        return await self.read_new(budget, epoch)

    async def replay(self, positions: list[Position], *, prefix: bool = False) -> list[Entry]:
        """Take ``positions`` (the first ones of the redelivery set when ``prefix``) out of the
        redelivery set and read them again."""
        if prefix:
            del self._redeliver[: len(positions)]
        else:
            chosen = set(positions)
            self._redeliver = [p for p in self._redeliver if p not in chosen]
        entries = await self.subscription.cursor.replay_entries(positions)
        txn = getattr(
            self.subscription.topic, "txn_buffer", None
        )  # None: transactions off (or a test double)
        if txn is not None:  # markers, aborted and transaction-held entries never go out
            entries, _ = await txn.filter_entries(self.subscription, entries, replay=True)
        return entries

    async def read_new(self, budget: int, epoch: int) -> list[Entry] | None:
        """New entries from the cursor's read position, minus the ones delivery delays."""
        entries = await self.subscription.cursor.read_entries(
            min(budget, self._max_read_entries), self._max_read_bytes
        )
        if not entries:
            return None
        txn = getattr(
            self.subscription.topic, "txn_buffer", None
        )  # None: transactions off (or a test double)
        if txn is not None:  # stop at the max-read position; drop markers, aborted, held (transaction.buffer)
            entries, blocked = await txn.filter_entries(self.subscription, entries)
            if blocked and not entries:
                return None
        if self.delayed is not None and epoch == self._epoch:
            entries = self.delayed.filter(entries)
        return entries

    def send_to(self, consumer: Consumer, batch: list[OutboundEntry], now_ms: int) -> None:
        """Step 5: every send goes through here, so the round counts what really left."""
        consumer.send(batch, now_ms)
        if self.rate.limited:  # counting costs a loop per entry: only when a limit needs it
            sent = self._sent
            sent[0] += len(batch)
            for out in batch:
                sent[1] += out.num_messages
                sent[2] += len(out.entry.data)

    def _outbound(self, entry: Entry) -> OutboundEntry | None:
        """The entry as it goes out, or None for a server-only marker (not for consumers)."""
        facts = entry.metadata  # kept beside the entry since its SEND, while it is cached
        if facts is not None:
            n, marker = facts.num_messages, facts.marker_type
        else:
            try:
                n, marker = dispatch_facts(entry.data)
            except CorruptPayload:
                n, marker = 1, None
        if marker is not None and marker in SERVER_ONLY_MARKERS:
            return None
        ack_set = self.subscription.cursor.get_ack_set(entry.position)
        return OutboundEntry(entry, n, self.redelivery_counts.get(entry.position, 0), ack_set)

    # ------------------------------------------------------------ strategy
    def read_budget(self) -> int:
        """Step 1: how many messages the consumers can take now (0: wait)."""
        raise NotImplementedError

    def deliver(self, entries: list[OutboundEntry]) -> None:
        """Step 5: choose consumers and :meth:`send_to` them; :meth:`requeue` the rest."""
        raise NotImplementedError

    def now_ms(self) -> int:
        return self.subscription.topic.clock.time_ms()
