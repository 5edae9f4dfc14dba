"""Ledger storage, as BookKeeper's DbLedgerStorage does it.

Theory of operation:

* **Add**: check the ledger's master key and fence, then append the entry to
  the journal (group commit, fsync).  When the journal group is durable the
  journal calls back *on the event loop* and the entry goes into the active
  write cache and the ledger's LAC / last entry move; then the add returns.
  Only durable entries are ever visible.
* **Checkpoint** (every ``flushInterval``, when the write cache fills, on
  close): the write cache goes to an entry log and the index, with the
  journal position it covers; older journal files are then deleted
  (storage_checkpoint.py).  Adds wait (bounded) while the cache is full.
* **Restart**: load ledger states and the mark from the index, replay the
  journal from the mark into the write cache (torn tail truncated), start a
  fresh journal file and entry log, checkpoint.
* **Read**: write caches, read cache, then index + entry log with
  read-ahead, single entries or ranges (storage_reads.py).
* **Fence**: mark fenced in memory at once (new adds fail) and write a FENCE
  record to the journal; return when it is durable.  Journal order makes any
  add queued before the fence durable (and readable) before the fence returns.
* Ledger states (master key, fenced, deleted, LAC seen, last entry id) live
  in memory for every ledger on this bookie (ledger_table.py) and are
  persisted at checkpoints.
* Several ``ledgerDirectories``: entry logs of ledger L go to directory
  ``L % n`` (entry_log.EntryLogSet); the index lives in the first one.

States NEW, WRITABLE, READ_ONLY, CLOSED: storage_state.py.
Blocking work runs on three executors: the journal's own thread, one storage
thread (checkpoint flushes, compaction, index writes: serialised) and a small
read pool.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

from magnetar.bookie.api import (
    BadRequestError,
    BookieError,
    BookieReadOnlyError,
    BookieUnavailableError,
    DiskFullError,
    LedgerFencedError,
)
from magnetar.bookie.caches import ReadCache, WriteCaches
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk import Disk, DiskUsage, RealDisk
from magnetar.bookie.entry_format import MalformedEntry, header_fields
from magnetar.bookie.entry_log import EntryLogSet
from magnetar.bookie.index import (
    LEDGER_PREFIX,
    MARK_KEY,
    Batch,
    IndexStore,
    LedgerState,
    RocksIndexStore,
    ledger_entries_range,
    ledger_key,
)
from magnetar.bookie.journal import START, Journal, JournalPosition, JournalRecord, RecordType
from magnetar.bookie.journal_groups import record_many
from magnetar.bookie.lac import LacWaiters
from magnetar.bookie.ledger_table import LedgerTable
from magnetar.bookie.storage_checkpoint import Checkpointer
from magnetar.bookie.storage_reads import StorageReads
from magnetar.bookie.storage_state import TRANSITIONS, StoragePaths, StorageState
from magnetar.common.latency import LatencyBuckets
from magnetar.runtime import BlockingExecutor, Clock, RealClock, TaskSupervisor

log = logging.getLogger(__name__)


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
            writer_thread=executor_factory is None,  # a simulation's executor keeps virtual time
        )
        self.journal.on_durable_group = self._apply_durable_group
        self.journal.on_failure = self._journal_error
        self.entry_logger = EntryLogSet(
            [f"{d}/current" for d in config.ledger_directories], self.disk, config.entry_log_size_limit_bytes
        )
        self.index: IndexStore | None = None
        self.table = LedgerTable(self._bookie_id)
        self.ledgers = self.table.states  # ledger id -> state (read-only view for callers)
        self.write_caches = WriteCaches()
        self._write_cache_max_bytes = config.write_cache_max_size_bytes
        self._read_cache = ReadCache(config.read_cache_max_size_bytes)
        self._reads = StorageReads(self)
        self.checkpointer = Checkpointer(self)
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
        if new not in TRANSITIONS[self.state]:
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
    def closed(self) -> bool:
        return self.state == StorageState.CLOSED

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
        self.supervisor.spawn(self.checkpointer.run_periodically(), name="checkpoint")
        return replayed

    async def _replay_progress(self, position: JournalPosition) -> None:
        self._replayed_to = position
        if self.write_caches.active.size_bytes >= self._write_cache_max_bytes // 2:
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
                lac = header_fields(rec.data)[2]
            except MalformedEntry:
                lac = -1
            self._apply_add(st, rec.ledger_id, rec.entry_id, rec.data, lac)

    def _apply_add(self, st: LedgerState, ledger_id: int, entry_id: int, data: bytes, lac: int) -> None:
        if not self.table.is_current(ledger_id, st):
            return
        self.write_caches.active.put(ledger_id, entry_id, data)
        self._read_cache.invalidate(ledger_id, entry_id)
        if entry_id > st.last_entry_id:
            st.last_entry_id = entry_id
        if lac > st.lac:
            st.lac = lac
            self._lac.notify(ledger_id, lac)
        self.table.mark_dirty(ledger_id)

    # --- adds -------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.state is not StorageState.WRITABLE:
            if self.state == StorageState.READ_ONLY:
                raise BookieReadOnlyError(f"bookie is read-only: {self.read_only_reason}", self.bookie_id)
            raise BookieUnavailableError(f"bookie storage is {self.state.value}", self.bookie_id)

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        # One coroutine frame, no await before the journal enqueue unless the write cache or
        # the journal queue is full (or the ledger is new here: the master-key record first).
        try:
            hdr_ledger, hdr_entry, lac, _ = header_fields(entry)
        except MalformedEntry as exc:
            raise BadRequestError(str(exc), self.bookie_id) from None
        if hdr_ledger != ledger_id or hdr_entry != entry_id or entry_id < 0:
            raise BadRequestError(
                f"entry header says {hdr_ledger}:{hdr_entry}, request says {ledger_id}:{entry_id}",
                self.bookie_id,
            )
        self._check_writable()
        if self.write_caches.active.size_bytes >= self._write_cache_max_bytes or not self.journal.has_room(2):
            await self.checkpointer.wait_for_cache_room(self._write_cache_max_bytes)
            await self.journal.wait_for_room(2)
            self._check_writable()
        # No await from here to the journal enqueue: the fence check and the journal order agree
        # (a fence enqueued later is durable later, so whoever fences sees this entry).
        st, created = self.table.for_write(ledger_id, master_key)
        if st.fenced and not recovery:
            raise LedgerFencedError(f"ledger {ledger_id} is fenced", self.bookie_id)
        try:
            if created:
                key_written = self.journal.append_fields_nowait(
                    RecordType.MASTER_KEY, ledger_id, -1, master_key
                )
            durable = self.journal.append_fields_nowait(
                RecordType.ADD, ledger_id, entry_id, entry, item=(st, ledger_id, entry_id, entry, lac)
            )
        except BookieError as exc:
            self._journal_failed(exc)
        if created:  # the ledger's first entry here: the key record too
            await self._await_journal(key_written, durable)
        else:
            try:
                await durable
            except Exception as exc:
                self._journal_failed(exc)

    def add_entry_nowait(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> asyncio.Future[JournalPosition] | None:
        """:meth:`add_entry` without a coroutine: the add is enqueued now and the returned future
        completes when it is durable (with the same errors).  None when the add must wait (write
        cache or journal queue full) or is the ledger's first here: then call :meth:`add_entry`.
        Errors found before the enqueue (bad header, fenced, read-only) are raised at once.
        The future is the journal's own for this record: completed with its group, no callback
        or second future per add (the write cache insert and the latency are per group:
        :meth:`_apply_durable_group`)."""
        if self.write_caches.active.size_bytes >= self._write_cache_max_bytes or not self.journal.has_room(2):
            return None
        st = self.table.states.get(ledger_id)
        if st is None or st.deleted:
            return None  # new here: the master-key record goes first (the coroutine path)
        if st.master_key != master_key:
            self.table.for_write(ledger_id, master_key)  # raises UnauthorizedAccessError
        try:
            hdr_ledger, hdr_entry, lac, _ = header_fields(entry)
        except MalformedEntry as exc:
            raise BadRequestError(str(exc), self.bookie_id) from None
        if hdr_ledger != ledger_id or hdr_entry != entry_id or entry_id < 0:
            raise BadRequestError(
                f"entry header says {hdr_ledger}:{hdr_entry}, request says {ledger_id}:{entry_id}",
                self.bookie_id,
            )
        if self.state is not StorageState.WRITABLE:
            self._check_writable()
        if st.fenced and not recovery:
            raise LedgerFencedError(f"ledger {ledger_id} is fenced", self.bookie_id)
        try:
            return self.journal.append_fields_nowait(
                RecordType.ADD, ledger_id, entry_id, entry, item=(st, ledger_id, entry_id, entry, lac)
            )
        except BookieError as exc:
            self._journal_failed(exc)

    def _apply_durable_group(
        self, items: list[tuple[LedgerState, int, int, bytes, int]], latency_ms: float
    ) -> None:
        """The journal's group hook: a group of adds is durable.  Every entry goes into the
        active write cache and moves its ledger's LAC / last entry (:meth:`_apply_add`, inlined:
        once per group, not a callback per add); then the add latency for all of them."""
        cache = self.write_caches.active
        put = cache.put
        states = self.table.states
        mark_dirty = self.table.mark_dirty
        invalidate = self._read_cache.invalidate if self._read_cache.size_bytes else None
        lac_moved: set[int] | None = set() if len(self._lac) else None
        last_ledger = -1
        for st, ledger_id, entry_id, data, lac in items:
            if st.deleted or states.get(ledger_id) is not st:
                continue
            put(ledger_id, entry_id, data)
            if invalidate is not None:
                invalidate(ledger_id, entry_id)
            if entry_id > st.last_entry_id:
                st.last_entry_id = entry_id
            if lac > st.lac:
                st.lac = lac
                if lac_moved is not None:
                    lac_moved.add(ledger_id)
            if ledger_id != last_ledger:
                mark_dirty(ledger_id)
                last_ledger = ledger_id
        if lac_moved:
            for ledger_id in lac_moved:
                self._lac.notify(ledger_id, states[ledger_id].lac)
        record_many(self.add_latency, latency_ms, len(items))  # bookkeeper_server_ADD_ENTRY_REQUEST
        if cache.size_bytes >= self._write_cache_max_bytes // 2:
            self.checkpointer.trigger()

    def _journal_error(self, exc: Exception) -> Exception:
        """The journal's failure hook (once per failed group): the error its adds get."""
        try:
            self._journal_failed(exc)
        except Exception as err:
            return err
        raise AssertionError("unreachable")  # pragma: no cover

    async def _await_journal(self, *waits: Awaitable[object]) -> None:
        results = await asyncio.gather(*waits, return_exceptions=True)
        for r in results:
            if isinstance(r, Exception):
                self._journal_failed(r)
            elif isinstance(r, BaseException):
                raise r

    def _journal_nowait(self, record: JournalRecord) -> asyncio.Future[JournalPosition]:
        try:
            return self.journal.append_nowait(record)
        except BookieError as exc:
            self._journal_failed(exc)

    def _journal_failed(self, exc: Exception) -> NoReturn:
        if isinstance(exc, DiskFullError):
            self.set_read_only(True, f"journal disk full: {exc}")
        elif self.journal.broken is not None:
            self.set_read_only(True, f"journal broken: {self.journal.broken}")
        if isinstance(exc, BookieError):
            exc.bookie_id = exc.bookie_id or self.bookie_id
            raise exc
        raise BookieError(f"journal failure: {exc!r}", self.bookie_id) from exc

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
        return await self._reads.read_entry(ledger_id, entry_id, fence=fence, master_key=master_key)

    async def read_entries(self, ledger_id: int, first: int, last: int, max_bytes: int = 0) -> list[bytes]:
        """Entries ``first..last`` in order (a batch read; storage_reads.py)."""
        return await self._reads.read_entries(ledger_id, first, last, max_bytes)

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

    # --- checkpoints (storage_checkpoint.py) ------------------------------------------------

    def _trigger_checkpoint(self) -> None:
        self.checkpointer.trigger()

    async def checkpoint(self) -> JournalPosition:
        if self.state not in (StorageState.WRITABLE, StorageState.READ_ONLY):
            return self.mark
        return await self._checkpoint_now()

    async def _checkpoint_now(self, replay_mark: JournalPosition | None = None) -> JournalPosition:
        return await self.checkpointer.checkpoint_now(replay_mark)

    # --- deletion (GC) --------------------------------------------------------------------

    async def delete_ledger(self, ledger_id: int) -> bool:
        """Forget a ledger: index entries and caches dropped, state kept as a deleted marker
        (so a journal replay does not bring it back).  Space is reclaimed by compaction."""
        st = self.table.mark_deleted(ledger_id, self.journal.enqueued_count)
        if st is None:
            return False
        self.write_caches.delete_ledger(ledger_id)
        self._read_cache.delete_ledger(ledger_id)
        self._lac.notify(ledger_id, -1)
        await self.storage_executor.run(self._delete_sync, ledger_id, st.encode())
        return True

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
            "write_cache_bytes": self.write_caches.active.size_bytes,
            "read_cache_bytes": self._read_cache.size_bytes,
            "read_cache_hits": self._read_cache.hits,
            "mark": (self.mark.file_id, self.mark.offset),
            "journal": self.journal.statistics(),
        }
