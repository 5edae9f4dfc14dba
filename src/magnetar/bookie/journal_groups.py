"""The journal's groups in formation, shared by the event loop and the writer thread.

Theory of operation: appends (on the event loop) add records to the *open*
group under a plain lock; a group that reaches ``journalBufferedWritesThreshold``
bytes or ``journalBufferedEntriesThreshold`` records is *sealed* (queued) and a
new one opens.  The writer takes the oldest sealed group, else the open one --
at once with ``journalFlushWhenQueueEmpty``, else once the open group's window
(``journalMaxGroupWaitMSec`` after its first record) has passed.

The writer thread sleeps on a second lock held until a waker releases it
(cheaper on the append path than a ``threading.Condition``).  ``_sleeping``
says who may wake it: while *idle* any append does, while a *window* runs only
a sealed group or :meth:`GroupQueue.stop`; the one who wakes it resets the
state first, so the lock is released exactly once per sleep.  In task mode
(an injected executor: simulation) nobody sleeps on it: an append that finds
the writer task idle calls ``on_nonempty`` instead.

A :class:`JournalGroup` carries the records' bytes (head, data, head, data...),
the futures to complete, the owner's items for its group hook and the rare
per-record ``on_durable`` callbacks.  :func:`record_many` records one group's
latency for all its records.  No I/O here: journal.py writes the groups.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from magnetar.common.latency import LatencyBuckets
from magnetar.runtime import Clock

_AWAKE, _IDLE, _WINDOW = 0, 1, 2  # the writer's sleep states


class JournalGroup:
    """Records committed together: their bytes, who waits for them, what to apply."""

    __slots__ = ("chunks", "futures", "items", "callbacks", "count", "nbytes", "opened", "last_seq")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []  # head, data, head, data...
        self.futures: list[asyncio.Future[Any]] = []
        self.items: list[Any] = []  # for the group hook (the storage's durable adds)
        self.callbacks: list[Callable[[], None]] = []  # per-record on_durable (rare)
        self.count = 0
        self.nbytes = 0
        self.opened = 0.0  # monotonic s of the first record
        self.last_seq = 0  # the journal's enqueue number of the last record


def record_many(buckets: LatencyBuckets, ms: float, n: int) -> None:
    """``n`` values of ``ms`` into ``buckets`` (one group's records) in one step."""
    counts = buckets.counts
    if type(counts) is tuple:
        counts = buckets.counts = list(counts)
    counts[bisect_left(buckets.bounds, ms)] += n
    buckets.count += n
    buckets.sum_ms += ms * n


class GroupQueue:
    def __init__(
        self,
        clock: Clock,
        *,
        thread_mode: bool,
        on_nonempty: Callable[[], None],
        flush_when_queue_empty: bool,
        max_group_wait_s: float,
        group_bytes_max: int,
        group_records_max: int,
    ) -> None:
        self._clock = clock
        self._thread_mode = thread_mode
        self._on_nonempty = on_nonempty
        self._flush_when_queue_empty = flush_when_queue_empty
        self._max_group_wait_s = max_group_wait_s
        self._bytes_max = group_bytes_max
        self._records_max = group_records_max
        self._lock = threading.Lock()
        self._signal = threading.Lock()
        self._signal.acquire()
        self._open = JournalGroup()
        self._sealed: collections.deque[JournalGroup] = collections.deque()
        self._sleeping = _AWAKE
        self._stop = False

    def add(
        self,
        head: bytes,
        data: bytes,
        future: asyncio.Future[Any],
        item: Any,
        on_durable: Callable[[], None] | None,
        seq: int,
    ) -> None:
        """One record into the open group (the caller numbers it: ``seq``)."""
        with self._lock:
            g = self._open
            if not g.count:
                g.opened = self._clock.monotonic()
            g.chunks += (head, data)
            g.futures.append(future)
            if item is not None:
                g.items.append(item)
            if on_durable is not None:
                g.callbacks.append(on_durable)
            g.count += 1
            g.nbytes += len(data)
            g.last_seq = seq
            if g.count >= self._records_max or g.nbytes >= self._bytes_max:
                self._sealed.append(g)
                self._open = JournalGroup()
                self._wake_locked(sealed=True)
            elif self._sleeping == _IDLE:
                self._wake_locked(sealed=False)

    def _wake_locked(self, sealed: bool) -> None:
        if not self._thread_mode:
            self._on_nonempty()
        elif self._sleeping == _IDLE or (sealed and self._sleeping == _WINDOW):
            self._sleeping = _AWAKE
            self._signal.release()

    def _take_locked(self, window_over: bool) -> JournalGroup | None:
        if self._sealed:
            return self._sealed.popleft()
        g = self._open
        if not g.count:
            return None
        if not (self._flush_when_queue_empty or window_over):
            if self._clock.monotonic() < g.opened + self._max_group_wait_s:
                return None
        self._open = JournalGroup()
        return g

    # --- the task writer (injected executor) ------------------------------------------------

    def take(self, window_over: bool = False) -> JournalGroup | None:
        """The next group to write now, or None (nothing yet, or its window still runs)."""
        with self._lock:
            return self._take_locked(window_over)

    def window_remaining(self) -> float | None:
        """Seconds left of the open group's window; None when the open group is empty."""
        g = self._open
        if not g.count:
            return None
        return max(0.0, g.opened + self._max_group_wait_s - self._clock.monotonic())

    def empty(self) -> bool:
        return not self._open.count and not self._sealed

    def set_idle(self, idle: bool) -> None:
        self._sleeping = _IDLE if idle else _AWAKE

    # --- the writer thread --------------------------------------------------------------------

    def next_blocking(self) -> JournalGroup | None:
        """The writer thread's wait for its next group; None once stopped."""
        lock, signal = self._lock, self._signal
        window_over = False
        while True:
            with lock:
                if self._stop:
                    return None
                g = self._take_locked(window_over)
                if g is not None:
                    return g
                if self._open.count:  # a group window runs (journalFlushWhenQueueEmpty off)
                    self._sleeping = _WINDOW
                    timeout = max(0.0, self._open.opened + self._max_group_wait_s - self._clock.monotonic())
                else:
                    self._sleeping = _IDLE
                    timeout = -1.0
            if signal.acquire(True, timeout):
                window_over = False
                continue
            with lock:  # timed out; a waker may have released the signal meanwhile
                woken = self._sleeping == _AWAKE
                self._sleeping = _AWAKE
            if woken:
                signal.acquire()  # consume that release (returns at once)
            window_over = True

    def stop(self) -> None:
        """The writer thread returns from :meth:`next_blocking` (after its current group)."""
        with self._lock:
            self._stop = True
            if self._thread_mode and self._sleeping != _AWAKE:
                self._sleeping = _AWAKE
                self._signal.release()

    def drain(self) -> list[JournalGroup]:
        """Every group not taken by the writer (close: they are failed)."""
        with self._lock:
            left = [*self._sealed, self._open]
            self._sealed.clear()
            self._open = JournalGroup()
        return left
