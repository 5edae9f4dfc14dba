"""Delayed delivery for Shared and Key_Shared subscriptions: a bounded delay index.

Theory of operation
-------------------
A message whose (outer) metadata carries ``deliver_at_time`` later than
*now* when the dispatcher reads it is not delivered: the tracker indexes its
position and the dispatcher moves on (Exclusive and Failover have no tracker
and deliver at once, as Pulsar does).  When it falls due the position is
queued for replay like a redelivery (without counting one).

The index is compact: time is cut into buckets of
``delayedDeliveryTickTimeMillis`` (default 1000); a bucket is an
``array('q')`` of (ledger id, entry id) pairs -- 16 bytes a message -- and a
heap orders the bucket numbers.  A bucket ``b`` holds deadlines in
``[b*tick, (b+1)*tick)`` and is released at ``(b+1)*tick - 1``: never early,
at most one tick late.  One timer task sleeps until the earliest bucket.

Bounded memory, spilling to storage: at most ``max_indexed`` positions are
indexed (``magnetarDelayedDeliveryMaxIndexedMessages``, default 100,000 =
1.6 MB).  Past that the tracker goes into *overflow*: it remembers only the
first position it could not index (``scan_from``) and lets the dispatcher
skip delayed entries from there on -- they stay unacknowledged in the
managed ledger, which is the spill.  When the index has drained below half
the cap, :meth:`before_round` re-reads storage from ``scan_from`` to the
cursor's read position and indexes (or queues, if due) every entry that is
delayed, not acknowledged and not known to the dispatcher (in flight at a
consumer or queued for replay) -- exactly the skipped ones, since every other
delayed entry read was either indexed or delivered.

Restart: nothing is persisted; a recovered cursor reads again from its
mark-delete position, so every unacknowledged delayed message is met (and
indexed) again.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from array import array
from typing import TYPE_CHECKING, Any

from magnetar.broker.service.admission import delayed_delivery_active
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.enums import SubType
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import peek_metadata

if TYPE_CHECKING:
    from magnetar.broker.service.dispatcher_base import Dispatcher

log = logging.getLogger(__name__)

DEFAULT_TICK_MS = 1000
DEFAULT_MAX_INDEXED = 100_000
RESCAN_BATCH_ENTRIES = 500


def _int(extra: Any, key: str, default: int) -> int:
    try:
        return int(extra.get(key, default))
    except (TypeError, ValueError):
        return default


def tracker_for(dispatcher: Dispatcher) -> DelayedDeliveryTracker | None:
    """A tracker for Shared and Key_Shared dispatchers when delayed delivery is enabled."""
    if dispatcher.sub_type not in (SubType.Shared, SubType.Key_Shared):
        return None
    extra = getattr(dispatcher.subscription.topic.config, "extra", {}) or {}
    if str(extra.get("delayedDeliveryEnabled", "true")).strip().lower() in ("false", "0", "no", "off"):
        return None
    if not delayed_delivery_active(dispatcher.subscription.topic):  # policy (.admission)
        return None
    return DelayedDeliveryTracker(
        dispatcher,
        tick_ms=max(1, _int(extra, "delayedDeliveryTickTimeMillis", DEFAULT_TICK_MS)),
        max_indexed=max(1, _int(extra, "magnetarDelayedDeliveryMaxIndexedMessages", DEFAULT_MAX_INDEXED)),
    )


class DelayedDeliveryTracker:
    def __init__(self, dispatcher: Any, *, tick_ms: int, max_indexed: int) -> None:
        self.dispatcher = dispatcher
        self.tick_ms = tick_ms
        self.max_indexed = max_indexed
        self._buckets: dict[int, array] = {}
        self._heap: list[int] = []
        self.size = 0
        self.scan_from: Position | None = None  # overflow: delayed entries from here are not indexed
        self._timer: asyncio.Task[None] | None = None
        self._timer_at_ms: int | None = None
        self._closed = False
        self.delivered_late_ms_max = 0

    # ------------------------------------------------------------ index
    def _now(self) -> int:
        return self.dispatcher.subscription.topic.clock.time_ms()

    def _index(self, pos: Position, deliver_at_ms: int) -> None:
        b = deliver_at_ms // self.tick_ms
        arr = self._buckets.get(b)
        if arr is None:
            arr = self._buckets[b] = array("q")
            heapq.heappush(self._heap, b)
        arr.append(pos.ledger_id)
        arr.append(pos.entry_id)
        self.size += 1

    def filter(self, entries: list[Entry]) -> list[Entry]:
        """Keep what may go now; index (or, in overflow, skip) delayed entries not yet due."""
        now = self._now()
        keep: list[Entry] = []
        for e in entries:
            at = _deliver_at(e)
            if at is None or at <= now:
                keep.append(e)
                continue
            if self.scan_from is not None:
                continue  # overflow: found again by the rescan
            if self.size >= self.max_indexed:
                self.scan_from = e.position
                continue
            self._index(e.position, at)
        self._arm()
        return keep

    def take_due(self) -> list[Position]:
        now = self._now()
        out: list[Position] = []
        while self._heap and (self._heap[0] + 1) * self.tick_ms - 1 <= now:
            b = heapq.heappop(self._heap)
            arr = self._buckets.pop(b)
            for i in range(0, len(arr), 2):
                out.append(Position(arr[i], arr[i + 1]))
            self.size -= len(arr) // 2
            self.delivered_late_ms_max = max(self.delivered_late_ms_max, now - ((b + 1) * self.tick_ms - 1))
        return out

    # ------------------------------------------------------------ dispatcher hook
    async def before_round(self) -> None:
        """Queue due positions for replay; rescan storage after an overflow once there is room."""
        due = self.take_due()
        if due:
            due.sort()
            self.dispatcher.requeue(due)
        if self.scan_from is not None and self.size < self.max_indexed // 2:
            await self._rescan()
        self._arm()

    async def _rescan(self) -> None:
        d = self.dispatcher
        cursor = d.subscription.cursor
        ml = d.subscription.topic.ml
        end = cursor.read_position
        pos = self.scan_from
        assert pos is not None
        self.scan_from = None
        known: set[Position] = set(d._redeliver)
        for c in d.consumers:
            known.update(c.pending_acks)
        now = self._now()
        due: list[Position] = []
        while pos < end:
            entries = await ml.read_entries_from(pos, RESCAN_BATCH_ENTRIES)
            entries = [e for e in entries if e.position < end]
            if not entries:
                break
            for e in entries:
                p = e.position
                if p in known or cursor.is_acknowledged(p):
                    continue
                at = _deliver_at(e)
                if at is None:
                    continue
                if at <= now:
                    due.append(p)
                elif self.size >= self.max_indexed:
                    self.scan_from = p  # still no room: continue from here next time
                    break
                else:
                    self._index(p, at)
            if self.scan_from is not None:
                break
            pos = entries[-1].position.next()
        if due:
            d.requeue(due)

    # ------------------------------------------------------------ timer
    def _arm(self) -> None:
        if self._closed or not self._heap:
            return
        at = (self._heap[0] + 1) * self.tick_ms - 1
        if self._timer is not None and not self._timer.done():
            if self._timer_at_ms is not None and self._timer_at_ms <= at:
                return
            self._timer.cancel()
        self._timer_at_ms = at
        delay_s = max(0.0, (at - self._now()) / 1000)
        self._timer = self.dispatcher.subscription.topic.supervisor.spawn(
            self._fire(delay_s), name="delayed-delivery-timer"
        )

    async def _fire(self, delay_s: float) -> None:
        await self.dispatcher.subscription.topic.clock.sleep(delay_s)
        self._timer_at_ms = None
        self.dispatcher.notify()

    def clear(self) -> None:
        """After a seek: the cursor reads everything again."""
        self._buckets.clear()
        self._heap.clear()
        self.size = 0
        self.scan_from = None

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self.clear()

    def stats(self) -> dict[str, Any]:
        index_bytes = sum(a.itemsize * len(a) + 64 for a in self._buckets.values()) + 8 * len(self._heap)
        return {
            "msgDelayed": self.size,
            "delayedMessageIndexSizeInBytes": index_bytes,
            "delayedDeliveryOverflow": self.scan_from is not None,
        }


def _deliver_at(entry: Entry) -> int | None:
    try:
        md = peek_metadata(entry.data)
    except CorruptPayload:
        return None
    if md.HasField("deliver_at_time"):
        return int(md.deliver_at_time)
    return None
