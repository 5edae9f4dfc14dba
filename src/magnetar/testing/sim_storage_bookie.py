"""A simulated bookie node running the real bookie storage over a memory disk.

Theory of operation: :class:`StorageSimBookie` is what
:class:`~magnetar.testing.simnet.SimNetwork` talks to when a simulation wants
the production storage code (journal with group commit, write cache,
checkpoints, entry logs, index, fencing and LAC state) instead of
:class:`~magnetar.testing.fake_bookie.FakeBookie`.  The storage runs
unmodified over a :class:`~magnetar.bookie.memory_disk.MemoryDisk` (a crash
keeps synced bytes plus a random torn prefix of the unsynced ones), a
:class:`~magnetar.bookie.index.MemoryIndexStore` (durable across crashes, as
RocksDB with synced writes is) and inline executors, so everything stays on
the virtual-time loop and a seed replays exactly.  The journal executor
sleeps a drawn delay on the injected clock before each piece of work: a
slow disk, so slow fsyncs hold acknowledgements back.  A small
``capacity_bytes`` fills the disk: the storage turns read-only (adds fail,
reads go on) and the ledger client must move on to other bookies.

``crash()`` is a power loss: the disk loses what was not synced, the old
storage object is abandoned (its handles are dead; its tasks are cancelled)
and calls fail until ``restart()`` opens a fresh storage that replays the
journal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from magnetar.bookie import api as bookie_api
from magnetar.bookie.api import BookieInfo
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.index import MemoryIndexStore
from magnetar.bookie.memory_disk import MemoryDisk
from magnetar.bookie.storage import LedgerStorage
from magnetar.runtime import Clock, Rng


class _SlowInlineExecutor:
    """Runs work inline, after an optional simulated device delay."""

    def __init__(self, name: str, clock: Clock, delay_s: Callable[[], float] | None) -> None:
        self.name = name
        self._clock = clock
        self._delay_s = delay_s
        self._closed = False

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise RuntimeError(f"executor {self.name} is closed")
        if self._delay_s is not None:
            delay = self._delay_s()
            if delay > 0:
                await self._clock.sleep(delay)
        return fn(*args, **kwargs)

    async def aclose(self) -> None:
        self._closed = True

    def close_nowait(self) -> None:
        self._closed = True


class StorageSimBookie:
    def __init__(
        self,
        bookie_id: str,
        clock: Clock,
        rng: Rng,
        *,
        device_delay_s: Callable[[], float],
        capacity_bytes: int = 1 << 40,
    ) -> None:
        self.bookie_id = bookie_id
        self.clock = clock
        self._rng = rng
        self._device_delay_s = device_delay_s
        self.disk = MemoryDisk(capacity_bytes=capacity_bytes)
        self.index = MemoryIndexStore()
        self.storage: LedgerStorage | None = None
        self.down = True
        self.epoch = 0
        self.accepted_adds: list[tuple[int, int, bool, bool]] = []  # not observable inside real storage
        self.counters = {"crashes": 0, "restarts": 0}
        self._cleanup: list[asyncio.Task[None]] = []

    def _executor(self, name: str, max_threads: int = 1) -> _SlowInlineExecutor:
        return _SlowInlineExecutor(name, self.clock, self._device_delay_s if "journal" in name else None)

    async def start(self) -> None:
        cfg = BookieConfig.for_data_dir(
            f"/{self.bookie_id.replace(':', '_')}",
            journal_max_group_wait_ms=1,
            entry_log_size_limit_bytes=64 * 1024,
            flush_interval_ms=500,
            write_cache_max_size_mb=4,
        )
        storage = LedgerStorage(
            cfg,
            disk=self.disk,
            clock=self.clock,
            index_factory=lambda _path: self.index,
            executor_factory=self._executor,  # type: ignore[arg-type]
            bookie_id=self.bookie_id,
        )
        await storage.open()
        self.storage = storage
        self.down = False

    def crash(self) -> None:
        if self.down:
            return
        self.down = True
        self.epoch += 1
        self.counters["crashes"] += 1
        self.disk.crash(self._rng)
        old, self.storage = self.storage, None
        if old is not None:
            self._cleanup.append(asyncio.ensure_future(old.supervisor.aclose()))

    async def restart(self) -> None:
        if not self.down:
            return
        self.counters["restarts"] += 1
        await self.start()

    @property
    def read_only(self) -> bool:
        return self.storage is not None and self.storage.read_only

    def grow_disk(self, capacity_bytes: int = 1 << 40) -> None:
        """The operator added space: the disk is no longer full and the storage writable again
        (what the bookie's disk checker does when usage falls below its threshold)."""
        self.disk.capacity_bytes = capacity_bytes
        if self.storage is not None and self.storage.read_only:
            self.storage.set_read_only(False, "disk space added")

    def _live(self) -> LedgerStorage:
        if self.down or self.storage is None:
            raise bookie_api.BookieUnavailableError("bookie is down", self.bookie_id)
        return self.storage

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        await self._live().add_entry(ledger_id, entry_id, master_key, entry, recovery=recovery)

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        return await self._live().read_entry(ledger_id, entry_id, fence=fence, master_key=master_key)

    async def read_lac(self, ledger_id: int) -> int:
        return await self._live().read_lac(ledger_id)

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        return await self._live().wait_lac(ledger_id, previous_lac, timeout_ms)

    async def get_info(self) -> BookieInfo:
        s = self._live()
        usage = await s.disk_usage()
        return BookieInfo(self.bookie_id, usage.total_bytes, usage.free_bytes, s.read_only)

    async def aclose(self) -> None:
        if self._cleanup:
            await asyncio.gather(*self._cleanup, return_exceptions=True)
        if self.storage is not None:
            await self.storage.aclose()
            self.storage = None
        self.down = True
