"""Disk checks: a bookie whose disks fill up turns read-only before it breaks.

Theory of operation (BookKeeper's LedgerDirsMonitor): every
``diskCheckInterval`` the checker asks the :class:`~magnetar.bookie.disk.Disk`
for the usage of the journal and ledger directories.  When any passes
``diskUsageThreshold`` (default 0.95) the storage goes READ_ONLY: adds are
refused with BookieReadOnlyError, reads and fencing go on, and the bookie
re-registers under the read-only path (the app listens to storage state
changes).  When every directory is back under ``diskUsageLwmThreshold``
(default 0.90) and it was the checker that made the bookie read-only, it
turns writable again.  The gap between the two thresholds stops flapping.

This is the early warning; the hard guarantee is elsewhere: an ENOSPC during
a journal write fails the add (never acknowledged) and leaves the journal
clean, and an ENOSPC during a checkpoint keeps the entries in the write
cache and the journal (see journal.py, storage.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from magnetar.bookie.disk import Disk, DiskUsage
from magnetar.bookie.storage import LedgerStorage, StorageState
from magnetar.runtime import BlockingExecutor, Clock

log = logging.getLogger(__name__)


class DiskChecker:
    def __init__(
        self,
        storage: LedgerStorage,
        disk: Disk,
        directories: list[str],
        executor: BlockingExecutor,
        clock: Clock,
        *,
        threshold: float,
        lwm_threshold: float,
        interval_ms: int,
    ) -> None:
        self._storage = storage
        self._disk = disk
        self._dirs = directories
        self._executor = executor
        self._clock = clock
        self._threshold = threshold
        self._lwm = min(lwm_threshold, threshold)
        self._interval_s = interval_ms / 1000.0
        self._made_read_only = False
        self.last_usage: dict[str, DiskUsage] = {}
        # Called after every check with the usage of the fullest directory (the app publishes it).
        self.usage_listeners: list[Callable[[DiskUsage], Awaitable[None]]] = []

    def _usages(self) -> dict[str, DiskUsage]:
        return {d: self._disk.usage(d) for d in self._dirs}

    async def check_once(self) -> bool:
        """One check; returns True when the bookie is read-only afterwards."""
        usages = await self._executor.run(self._usages)
        self.last_usage = usages
        worst_dir, worst = max(usages.items(), key=lambda kv: kv[1].used_fraction)
        fraction = worst.used_fraction
        for listener in self.usage_listeners:
            try:
                await listener(worst)
            except Exception:  # a metadata hiccup must not stop the disk check itself
                log.exception("bookie %s: publishing disk usage failed", self._storage.bookie_id)
        state = self._storage.state
        if state == StorageState.WRITABLE and fraction > self._threshold:
            reason = (
                f"disk usage of {worst_dir} is {fraction:.1%}, above diskUsageThreshold {self._threshold:.1%}"
            )
            log.warning("bookie %s: %s; turning read-only", self._storage.bookie_id, reason)
            self._storage.set_read_only(True, reason)
            self._made_read_only = True
        elif state == StorageState.READ_ONLY and self._made_read_only and fraction < self._lwm:
            log.info(
                "bookie %s: disk usage back to %.1f%%; writable again",
                self._storage.bookie_id,
                fraction * 100,
            )
            self._storage.set_read_only(False)
            self._made_read_only = False
        return self._storage.read_only

    async def run(self) -> None:
        while True:
            try:
                await self.check_once()
            except Exception:
                log.exception("disk check failed")
            await self._clock.sleep(self._interval_s)
