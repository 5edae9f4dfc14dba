"""Ledger storage, as BookKeeper's DbLedgerStorage does it.

Theory of operation:

* **Add**: check the ledger's master key and fence, then append the entry to
  the journal (group commit, fsync).  When the journal group is durable the
  journal calls back *on the event loop* and the entry goes into the active
  write cache and the ledger's LAC / last entry move; then the add returns.
  Only durable entries are ever visible.
* **Checkpoint** (every ``flushInterval``, when the write cache fills, on
  close): in one synchronous step read the journal's ``synced_position`` (the
  mark) and swap the active write cache for an empty one.  Every record at or
  before the mark had its callback run before the mark moved, so it is in the
  swapped-out cache or an older, already flushed one.  The swapped cache is
  written, sorted, to the active entry log (one fsync) and then the locations,
  dirty ledger states, per-log usage and the mark go into the index in one
  synced batch.  Journal files before the mark are then deleted.
* **Restart**: load ledger states and the mark from the index, replay the
  journal from the mark into the write cache (torn tail truncated), start a
  fresh journal file and entry log, checkpoint.
* **Read**: active cache, flushing cache, read cache, then index + entry log
  (on the read executor); ``LAST_ENTRY`` means the highest entry id stored.
  ``read_entries(first, last)`` reads a range in one call (a batch read): the
  run the caches hold is answered at once, a miss goes to the entry log once
  and its read-ahead fills the cache for the entries after it.
* **Fence**: mark fenced in memory at once (new adds fail) and write a FENCE
  record to the journal; return when it is durable.  Journal order makes any
  add queued before the fence durable (and readable) before the fence returns.
* Ledger states (master key, fenced, deleted, LAC seen, last entry id) live
  in memory for every ledger on this bookie (ledger_table.py) and are
  persisted at checkpoints.
* Several ``ledgerDirectories``: entry logs of ledger L go to directory
  ``L % n`` (entry_log.EntryLogSet); the index lives in the first one.

State machine (transitions only in ``_set_state``):

    NEW --open--> WRITABLE <--disk check / journal broken--> READ_ONLY
    any --aclose--> CLOSED

In READ_ONLY adds fail with BookieReadOnlyError; reads and fencing go on.
Blocking work runs on three executors: the journal's own thread, one storage
thread (checkpoint flushes, compaction, index writes: serialised) and a small
read pool.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn

from magnetar.bookie.api import (
    LAST_ENTRY,
    BadRequestError,
    BookieError,
    BookieReadOnlyError,
    BookieUnavailableError,
    DiskFullError,
    LedgerFencedError,
    NoSuchEntryError,
    TooManyRequestsError,
)
from magnetar.bookie.caches import ReadCache, WriteCache
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk import Disk, DiskUsage, RealDisk
from magnetar.bookie.entry_format import MalformedEntry, parse_header
from magnetar.bookie.entry_log import EntryLogCorruption, EntryLogSet
from magnetar.bookie.index import (
    LEDGER_PREFIX,
    MARK_KEY,
    Batch,
    IndexStore,
    LedgerState,
    Location,
    RocksIndexStore,
    encode_log_usage,
    entry_key,
    ledger_entries_range,
    ledger_key,
    log_key,
)
from magnetar.bookie.journal import START, Journal, JournalPosition, JournalRecord, RecordType
from magnetar.bookie.lac import LacWaiters
from magnetar.bookie.ledger_table import LedgerTable
from magnetar.common.latency import LatencyBuckets
from magnetar.runtime import BlockingExecutor, Clock, RealClock, TaskSupervisor

log = logging.getLogger(__name__)

_CACHE_ROOM_TIMEOUT_S = 10.0  # BK dbStorage_maxThrottleTimeMs
_READ_AHEAD_BYTES = 256 * 1024  # one read on a cache miss; following entries go to the read cache


class StorageState(enum.Enum):
    NEW = "new"
    WRITABLE = "writable"
    READ_ONLY = "read_only"
    CLOSED = "closed"


_TRANSITIONS: dict[StorageState, frozenset[StorageState]] = {
    StorageState.NEW: frozenset({StorageState.WRITABLE, StorageState.CLOSED}),
    StorageState.WRITABLE: frozenset({StorageState.READ_ONLY, StorageState.CLOSED}),
    StorageState.READ_ONLY: frozenset({StorageState.WRITABLE, StorageState.CLOSED}),
    StorageState.CLOSED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class StoragePaths:
    journal_dir: str
    ledger_dir: str

    @property
    def entry_log_dir(self) -> str:
        return f"{self.ledger_dir}/current"

    @property
    def index_dir(self) -> str:
        return f"{self.ledger_dir}/current/index"


class LedgerStorage:
    def __init__(
        self,
        config: BookieConfig,
        *,
        disk: Disk | None = None,
        clock: Clock | None = None,
        index_factory: Callable[[str], IndexStore] | None = None,
        executor_factory: Callable[[str, int], BlockingExecutor] | None = None,
        bookie_id: str | None = None,
    ) -> None:
        self.config = config
        self._bookie_id = bookie_id or config.effective_bookie_id
        self.disk = disk or RealDisk()
        self.clock = clock or RealClock()
        self.add_latency = LatencyBuckets()
        self.paths = StoragePaths(config.journal_directory, config.ledger_directories[0])
        self._index_factory = index_factory or RocksIndexStore
        self.supervisor = TaskSupervisor(f"bookie-storage:{self.bookie_id}")
        # A simulator passes an executor factory that runs work inline (deterministic).
        make_executor = executor_factory or BlockingExecutor
        self.journal_executor = make_executor("bookie-journal", 1)
        self.storage_executor = make_executor("bookie-storage", 1)
        self.read_executor = make_executor("bookie-read", 2)
        self.journal = Journal(
            config.journal_directory,
            self.disk,
            self.journal_executor,
            self.clock,
            self.supervisor,
            sync_data=config.journal_sync_data,
            max_group_wait_ms=config.journal_max_group_wait_ms,
            flush_when_queue_empty=config.journal_flush_when_queue_empty,
            group_bytes_max=config.journal_buffered_writes_threshold_bytes,
            group_records_max=config.journal_buffered_entries_threshold,
            file_size_max_bytes=config.journal_max_size_bytes,
            queue_size=config.journal_queue_size,
            prealloc_bytes=config.journal_prealloc_size_mb * 1024 * 1024,
        )
        self.entry_logger = EntryLogSet(
            [f"{d}/current" for d in config.ledger_directories], self.disk, config.entry_log_size_limit_bytes
        )
        self.index: IndexStore | None = None
        self.table = LedgerTable(self._bookie_id)
        self.ledgers = self.table.states  # ledger id -> state (read-only view for callers)
        self._active = WriteCache()
        self._flushing: WriteCache | None = None
        self._read_cache = ReadCache(config.read_cache_max_size_bytes)
        self._checkpoint_lock = asyncio.Lock()
        self._cache_room = asyncio.Event()
        self._cache_room.set()
        self._lac = LacWaiters(self.clock, config.max_lac_waiters)
        self.mark = START
        self._replayed_to = START
        self.state = StorageState.NEW
        self.read_only_reason = ""
        self.state_listeners: list[Callable[[StorageState], None]] = []

    @property
    def bookie_id(self) -> str:
        return self._bookie_id

    @bookie_id.setter
    def bookie_id(self, value: str) -> None:  # the app learns it after binding port 0
        self._bookie_id = value
        self.table.bookie_id = value

    # --- state machine ----------------------------------------------------------------------

    def _set_state(self, new: StorageState, reason: str = "") -> None:
        if new == self.state:
            return
        if new not in _TRANSITIONS[self.state]:
            raise BookieError(f"storage cannot go from {self.state.value} to {new.value}")
        log.info("bookie %s storage %s -> %s %s", self.bookie_id, self.state.value, new.value, reason)
        self.state = new
        self.read_only_reason = reason if new == StorageState.READ_ONLY else ""
        for listener in list(self.state_listeners):
            listener(new)

    def set_read_only(self, read_only: bool, reason: str = "") -> None:
        if self.state in (StorageState.NEW, StorageState.CLOSED):
            return
        self._set_state(StorageState.READ_ONLY if read_only else StorageState.WRITABLE, reason)

    @property
    def read_only(self) -> bool:
        return self.state == StorageState.READ_ONLY

    # --- lifecycle --------------------------------------------------------------------------

    async def open(self) -> int:
        """Load the index, replay the journal; returns the number of records replayed."""
        if self.state != StorageState.NEW:
            raise BookieError("storage already opened")
        await self.storage_executor.run(self._open_sync)
        start_mark = self.mark
        self._replayed_to = start_mark
        replayed = await self.journal.replay(self.mark, self._apply_replayed, self._replay_progress)
        disk_full = ""
        if replayed:
            log.info("bookie %s replayed %d journal records from %s", self.bookie_id, replayed, start_mark)
            try:
                await self._checkpoint_now(self._replayed_to)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                disk_full = f"ledger disk full while checkpointing the replayed journal: {exc}"
        self.journal.start()
        self._set_state(StorageState.WRITABLE)
        if disk_full:  # start anyway: the replayed entries stay readable from the write cache
            self._set_state(StorageState.READ_ONLY, disk_full)
        self.supervisor.spawn(self._periodic_checkpoint(), name="checkpoint")
        return replayed

    async def _replay_progress(self, position: JournalPosition) -> None:
        self._replayed_to = position
        if self._active.size_bytes >= self.config.write_cache_max_size_bytes // 2:
            try:
                await self._checkpoint_now(position)  # bounded memory while replaying a long journal
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                log.warning("bookie %s: disk full while replaying; keeping entries in memory", self.bookie_id)

    def _open_sync(self) -> None:
        self.disk.makedirs(self.paths.entry_log_dir)
        self.index = self._index_factory(self.paths.index_dir)
        raw_mark = self.index.get(MARK_KEY)
        if raw_mark is not None:
            self.mark = JournalPosition.decode(raw_mark)
        self.table.load(
            (int.from_bytes(key[1:9], "big"), LedgerState.decode(value))
            for key, value in self.index.scan(LEDGER_PREFIX, LEDGER_PREFIX + b"\xff" * 9)
        )
        self.entry_logger.open()

    async def aclose(self) -> None:
        if self.state == StorageState.CLOSED:
            return
        was_open = self.state != StorageState.NEW
        self._set_state(StorageState.CLOSED)
        if was_open:
            await self.journal.aclose()  # drains queued adds first
        await self.supervisor.aclose()
        self._lac.cancel_all()
        if was_open:
            try:
                await self._checkpoint_now()
            except Exception:
                log.exception("final checkpoint failed; the journal replays it on restart")
        await self.storage_executor.run(self._close_sync)
        for ex in (self.journal_executor, self.storage_executor, self.read_executor):
            await ex.aclose()

    def _close_sync(self) -> None:
        self.entry_logger.close()
        if self.index is not None:
            self.index.close()

    # --- journal replay -------------------------------------------------------------------

    def _apply_replayed(self, rec: JournalRecord) -> None:
        st = self.table.for_replay(rec.ledger_id)
        if st is None:
            return
        if rec.type == RecordType.MASTER_KEY:
            if not st.master_key:
                st.master_key = rec.data
        elif rec.type == RecordType.FENCE:
            st.fenced = True
        elif rec.type == RecordType.ADD:
            try:
                lac = parse_header(rec.data).lac
            except MalformedEntry:
                lac = -1
            self._apply_add(st, rec.ledger_id, rec.entry_id, rec.data, lac)

    def _apply_add(self, st: LedgerState, ledger_id: int, entry_id: int, data: bytes, lac: int) -> None:
        if not self.table.is_current(ledger_id, st):
            return
        self._active.put(ledger_id, entry_id, data)
        self._read_cache.invalidate(ledger_id, entry_id)
        if entry_id > st.last_entry_id:
            st.last_entry_id = entry_id
        if lac > st.lac:
            st.lac = lac
            self._lac.notify(ledger_id, lac)
        self.table.mark_dirty(ledger_id)

    # --- adds -------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.state == StorageState.READ_ONLY:
            raise BookieReadOnlyError(f"bookie is read-only: {self.read_only_reason}", self.bookie_id)
        if self.state != StorageState.WRITABLE:
            raise BookieUnavailableError(f"bookie storage is {self.state.value}", self.bookie_id)

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        try:
            header = parse_header(entry)
        except MalformedEntry as exc:
            raise BadRequestError(str(exc), self.bookie_id) from None
        if header.ledger_id != ledger_id or header.entry_id != entry_id or entry_id < 0:
            raise BadRequestError(
                f"entry header says {header.ledger_id}:{header.entry_id}, request says {ledger_id}:{entry_id}",
                self.bookie_id,
            )
        t0 = self.clock.monotonic()
        self._check_writable()
        await self._wait_cache_room()
        await self.journal.wait_for_room(2)
        # No await from here to the journal enqueue: the fence check and the journal order agree
        # (a fence enqueued later is durable later, so whoever fences sees this entry).
        self._check_writable()
        st, created = self.table.for_write(ledger_id, master_key)
        if st.fenced and not recovery:
            raise LedgerFencedError(f"ledger {ledger_id} is fenced", self.bookie_id)
        waits = []
        if created:
            waits.append(
                self._journal_nowait(JournalRecord(RecordType.MASTER_KEY, ledger_id, -1, master_key))
            )
        record = JournalRecord(RecordType.ADD, ledger_id, entry_id, entry)
        waits.append(
            self._journal_nowait(record, lambda: self._apply_add(st, ledger_id, entry_id, entry, header.lac))
        )
        await self._await_journal(*waits)
        self.add_latency.record((self.clock.monotonic() - t0) * 1000)  # bookkeeper_server_ADD_ENTRY_REQUEST
        if self._active.size_bytes >= self.config.write_cache_max_size_bytes // 2:
            self._trigger_checkpoint()

    def _journal_nowait(
        self, record: JournalRecord, on_durable: Callable[[], None] | None = None
    ) -> asyncio.Future[JournalPosition]:
        try:
            return self.journal.append_nowait(record, on_durable)
        except BookieError as exc:
            self._journal_failed(exc)

    async def _await_journal(self, *waits: Awaitable[object]) -> None:
        if len(waits) == 1:  # the common case: no extra task per add
            try:
                await waits[0]
            except Exception as exc:
                self._journal_failed(exc)
            return
        results = await asyncio.gather(*waits, return_exceptions=True)
        for r in results:
            if isinstance(r, Exception):
                self._journal_failed(r)
            elif isinstance(r, BaseException):
                raise r

    def _journal_failed(self, exc: Exception) -> NoReturn:
        if isinstance(exc, DiskFullError):
            self.set_read_only(True, f"journal disk full: {exc}")
        elif self.journal.broken is not None:
            self.set_read_only(True, f"journal broken: {self.journal.broken}")
        if isinstance(exc, BookieError):
            exc.bookie_id = exc.bookie_id or self.bookie_id
            raise exc
        raise BookieError(f"journal failure: {exc!r}", self.bookie_id) from exc

    async def _wait_cache_room(self) -> None:
        if self._active.size_bytes < self.config.write_cache_max_size_bytes:
            return
        self._trigger_checkpoint()
        deadline = self.clock.monotonic() + _CACHE_ROOM_TIMEOUT_S
        while self._active.size_bytes >= self.config.write_cache_max_size_bytes:
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                raise TooManyRequestsError("write cache full and flush is not keeping up", self.bookie_id)
            self._cache_room.clear()
            self._trigger_checkpoint()
            try:
                await asyncio.wait_for(self._cache_room.wait(), remaining)
            except TimeoutError:
                pass

    # --- fencing, reads, LAC ----------------------------------------------------------------

    async def fence(self, ledger_id: int, master_key: bytes) -> None:
        if self.state not in (StorageState.WRITABLE, StorageState.READ_ONLY):
            raise BookieUnavailableError(f"bookie storage is {self.state.value}", self.bookie_id)
        await self.journal.wait_for_room(2)
        st, created = self.table.for_write(ledger_id, master_key)
        st.fenced = True
        self.table.mark_dirty(ledger_id)
        waits = []
        if created:
            waits.append(
                self._journal_nowait(JournalRecord(RecordType.MASTER_KEY, ledger_id, -1, master_key))
            )
        waits.append(self._journal_nowait(JournalRecord(RecordType.FENCE, ledger_id, -1, b"")))
        await self._await_journal(*waits)

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        if fence:
            await self.fence(ledger_id, master_key)
        if self.state == StorageState.CLOSED:
            raise BookieUnavailableError("bookie storage is closed", self.bookie_id)
        st = self.table.existing(ledger_id)
        if entry_id == LAST_ENTRY:
            entry_id = st.last_entry_id
            if entry_id < 0:
                raise NoSuchEntryError(f"ledger {ledger_id} has no entries here", self.bookie_id)
        elif entry_id < 0:
            raise BadRequestError(f"bad entry id {entry_id}", self.bookie_id)
        data = self._cached(ledger_id, entry_id)
        if data is not None:
            return data
        run = None
        for _attempt in range(2):  # compaction may move the entry between lookup and read
            try:
                run = await self.read_executor.run(self._read_sync, ledger_id, entry_id)
            except FileNotFoundError:
                continue
            except EntryLogCorruption as exc:
                raise BookieError(f"stored entry is corrupt: {exc}", self.bookie_id) from None
            break
        if run:
            data = run[0][1]
            for eid, ahead in run[1:]:
                newer = self._active.get(ledger_id, eid) is not None or (
                    self._flushing is not None and self._flushing.get(ledger_id, eid) is not None
                )
                if not newer:
                    self._read_cache.put(ledger_id, eid, ahead)
        if data is None:
            data = self._cached(ledger_id, entry_id)  # flushed or compacted while we looked
        if data is None:
            raise NoSuchEntryError(f"entry {ledger_id}:{entry_id} not found", self.bookie_id)
        self._read_cache.put(ledger_id, entry_id, data)
        return data

    async def read_entries(self, ledger_id: int, first: int, last: int, max_bytes: int = 0) -> list[bytes]:
        """Entries ``first..last`` in order (a batch read); stops early at ``max_bytes``
        (0: no limit, at least one entry is returned) or at the first entry this bookie does
        not have (NoSuchEntryError only if it lacks ``first``)."""
        if first < 0 or last < first:
            raise BadRequestError(f"bad entry range {first}..{last}", self.bookie_id)
        out: list[bytes] = []
        nbytes = 0
        for entry_id in range(first, last + 1):
            data = self._cached(ledger_id, entry_id)
            if data is None:
                try:
                    data = await self.read_entry(ledger_id, entry_id)
                except NoSuchEntryError:
                    if not out:
                        raise
                    break
            out.append(data)
            nbytes += len(data)
            if max_bytes and nbytes >= max_bytes:
                break
        return out

    def _cached(self, ledger_id: int, entry_id: int) -> bytes | None:
        data = self._active.get(ledger_id, entry_id)
        if data is None and self._flushing is not None:
            data = self._flushing.get(ledger_id, entry_id)
        if data is None:
            data = self._read_cache.get(ledger_id, entry_id)
        return data

    def _read_sync(self, ledger_id: int, entry_id: int) -> list[tuple[int, bytes]] | None:
        """The entry, then read-ahead entries that the index confirms live where they were read."""
        assert self.index is not None
        raw = self.index.get(entry_key(ledger_id, entry_id))
        if raw is None:
            return None
        loc = Location.decode(raw)
        if self.config.read_ahead_batch_size <= 1:
            return [(entry_id, self.entry_logger.read(loc, ledger_id, entry_id))]
        run = self.entry_logger.read_run(
            loc, ledger_id, entry_id, _READ_AHEAD_BYTES, self.config.read_ahead_batch_size
        )
        out = [(entry_id, run[0].data)]
        for rec in run[1:]:
            if self.index.get(entry_key(ledger_id, rec.entry_id)) != rec.location.encode():
                break  # a newer copy lives elsewhere: stop rather than cache a stale one
            out.append((rec.entry_id, rec.data))
        return out

    async def read_lac(self, ledger_id: int) -> int:
        st = self.table.live(ledger_id)
        return -1 if st is None else st.lac

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        current = await self.read_lac(ledger_id)
        if current > previous_lac:
            return current
        await self._lac.wait(ledger_id, previous_lac, timeout_ms)
        return await self.read_lac(ledger_id)

    def ledger_exists(self, ledger_id: int) -> bool:
        return self.table.exists(ledger_id)

    def ledger_ids(self) -> list[int]:
        return self.table.ids()

    async def disk_usage(self) -> DiskUsage:
        return await self.read_executor.run(self.disk.usage, self.paths.ledger_dir)

    # --- checkpoints ------------------------------------------------------------------------

    def _trigger_checkpoint(self) -> None:
        if not self._checkpoint_lock.locked() and not self.supervisor.closed:
            self.supervisor.spawn(self.checkpoint(), name="checkpoint-now")

    async def _periodic_checkpoint(self) -> None:
        while True:
            await self.clock.sleep(self.config.flush_interval_ms / 1000.0)
            try:
                await self.checkpoint()
            except Exception:
                log.exception("bookie %s checkpoint failed; will retry", self.bookie_id)

    async def checkpoint(self) -> JournalPosition:
        if self.state not in (StorageState.WRITABLE, StorageState.READ_ONLY):
            return self.mark
        return await self._checkpoint_now()

    async def _checkpoint_now(self, replay_mark: JournalPosition | None = None) -> JournalPosition:
        async with self._checkpoint_lock:
            # --- one synchronous step: the mark and the cache swap agree ---
            # After a restart the write cache also holds what the replay read, up to _replayed_to
            # (the journal's own position starts over in a new file).
            mark = (
                replay_mark
                if replay_mark is not None
                else max(self.journal.synced_position, self._replayed_to)
            )
            synced_count = self.journal.synced_count
            if mark < self.mark:
                mark = self.mark
            cache = self._active
            self._active = WriteCache()
            self._flushing = cache
            dirty = self.table.take_dirty()
            items = cache.sorted_items()
            # --------------------------------------------------------------
            try:
                await self.storage_executor.run(self._flush_sync, items, dirty, mark)
            except BaseException as exc:
                self._restore_after_failed_flush(cache, dirty)
                if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                    self.set_read_only(True, f"ledger disk full during checkpoint: {exc}")
                raise
            finally:
                self._flushing = None
                self._cache_room.set()
            self.mark = mark
            if replay_mark is None:
                await self._prune_deleted(synced_count)
        await self.journal.delete_files_before(mark)
        return mark

    def _restore_after_failed_flush(self, cache: WriteCache, dirty: dict[int, bytes]) -> None:
        for ledger_id, entry_id, data in cache.sorted_items():
            if self.table.exists(ledger_id) and self._active.get(ledger_id, entry_id) is None:
                self._active.put(ledger_id, entry_id, data)
        self.table.restore_dirty(dirty)

    def _flush_sync(
        self, items: list[tuple[int, int, bytes]], dirty: dict[int, bytes], mark: JournalPosition
    ) -> None:
        assert self.index is not None
        batch = Batch()
        if items:
            locations, usage = self.entry_logger.append_batch(items)
            for (ledger_id, entry_id, _), loc in zip(items, locations, strict=True):
                batch.put(entry_key(ledger_id, entry_id), loc.encode())
            for log_id, per_ledger in usage.items():
                batch.put(log_key(log_id), encode_log_usage(per_ledger))
        for ledger_id, raw in dirty.items():
            batch.put(ledger_key(ledger_id), raw)
        batch.put(MARK_KEY, mark.encode())
        self.index.write(batch, sync=True)

    # --- deletion (GC) --------------------------------------------------------------------

    async def delete_ledger(self, ledger_id: int) -> bool:
        """Forget a ledger: index entries and caches dropped, state kept as a deleted marker
        (so a journal replay does not bring it back).  Space is reclaimed by compaction."""
        st = self.table.mark_deleted(ledger_id, self.journal.enqueued_count)
        if st is None:
            return False
        self._active.delete_ledger(ledger_id)
        if self._flushing is not None:
            self._flushing.delete_ledger(ledger_id)
        self._read_cache.delete_ledger(ledger_id)
        self._lac.notify(ledger_id, -1)
        await self.storage_executor.run(self._delete_sync, ledger_id, st.encode())
        return True

    async def _prune_deleted(self, synced_count: int) -> None:
        """Drop deleted-ledger markers once the checkpoint mark is past every journal record
        enqueued before the deletion: a replay can no longer bring those ledgers back."""
        done = self.table.prunable(synced_count)
        if not done:
            return
        batch = Batch()
        for lid in done:
            batch.delete(ledger_key(lid))
        assert self.index is not None
        await self.storage_executor.run(self.index.write, batch)
        self.table.forget(done)

    def _delete_sync(self, ledger_id: int, state: bytes) -> None:
        assert self.index is not None
        batch = Batch()
        start, end = ledger_entries_range(ledger_id)
        batch.delete_range(start, end)
        batch.put(ledger_key(ledger_id), state)
        self.index.write(batch, sync=True)

    def statistics(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "ledgers": len(self.ledger_ids()),
            "write_cache_bytes": self._active.size_bytes,
            "read_cache_bytes": self._read_cache.size_bytes,
            "read_cache_hits": self._read_cache.hits,
            "mark": (self.mark.file_id, self.mark.offset),
            "journal": self.journal.statistics(),
        }
