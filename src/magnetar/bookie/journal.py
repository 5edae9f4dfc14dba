"""The journal: every add is written here and fsynced before it is acknowledged.

Theory of operation (BookKeeper's Journal).  This module is the asynchronous
half: records are collected into *groups*, and a writer commits one group at a
time with one write and one fsync.  The files themselves (format, rotation,
preallocation, torn tails, failed writes) are :mod:`magnetar.bookie.journal_files`;
the record format is journal_format.py.

* ``append_fields_nowait`` encodes the record and adds it to the *open group*
  synchronously, so records keep their callers' order.  A record is kept as
  two byte strings, its 25-byte frame + header and the caller's data, so the
  data is never copied before the group's one write.  The queue is bounded
  (``journalQueueSize`` records not yet durable; ``wait_for_room`` waits for
  space, ``append`` does both and waits).  A group is sealed when it reaches
  ``journalBufferedWritesThreshold`` bytes or ``journalBufferedEntriesThreshold``
  records; a new one opens behind it.
* Adaptive group commit: the writer takes the oldest sealed group, or the open
  one, writes it and fsyncs once.  While that fsync runs the next group builds
  up: under load groups form by themselves.  With ``journalFlushWhenQueueEmpty``
  (on by default here) an idle writer takes a group at once, so a lone writer
  waits for its own fsync only; with it off the writer first waits up to
  ``journalMaxGroupWaitMSec`` after the group's first record (BookKeeper's
  default; it trades a lone writer's latency for bigger groups).
  With ``journalSyncData=false`` the fsync is skipped: the add is acknowledged
  once the OS has the bytes.
* The writer is a dedicated thread (a real executor: production): it sleeps
  while there is nothing to write, is woken by the append that finds it idle
  (the groups and that hand-off are journal_groups.py), writes + fsyncs, and
  hands the finished group back to the event loop with *one*
  ``call_soon_threadsafe`` -- no executor future, no task wake-up per group, so
  a lone writer's add costs its fsync plus two thread wake-ups.  With an
  injected executor (a simulation, inline disks) the writer is a task that
  awaits ``executor.run`` instead: the same groups, in virtual time.
* Completing a group (on the loop, in group order): first the group's
  ``on_durable`` callbacks and the *group hook* (``on_durable_group``: the
  storage puts the group's entries into its write cache in one call), then
  :attr:`Journal.synced_position` moves past it, then its futures complete.
  So a checkpoint that reads ``synced_position`` and swaps the write cache in
  one synchronous step never loses an entry between the two (storage.py).
  The add latency (``bookie_journal_JOURNAL_ADD_ENTRY``) is recorded once per
  group for all its records, measured from the group's first record (an upper
  bound for the later ones).
* A failed write fails every add of its group (none is acknowledged); the
  error goes through ``on_failure`` (the storage turns read-only on ENOSPC)
  once per group.  The files cut the half-written group off, or mark the
  journal *broken* (:attr:`broken`), after which appends are refused.
* Replay (restart) feeds every record from the checkpoint mark onward, in
  order, to the storage; a fresh file is then started for new writes.
  Checkpoints delete files wholly before their mark.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from magnetar.bookie.api import BookieError, BookieUnavailableError, DiskFullError, TooManyRequestsError
from magnetar.bookie.disk import Disk
from magnetar.bookie.journal_files import JournalFiles
from magnetar.bookie.journal_format import (
    FILE_HEADER_SIZE,
    FILE_MAGIC,
    MAX_RECORD_BYTES,
    RECORD_OVERHEAD,
    START,
    JournalPosition,
    JournalRecord,
    RecordType,
    ScanResult,
    encode_record_head,
    journal_file_name,
    parse_journal_file_name,
    scan_records,
)
from magnetar.bookie.journal_groups import GroupQueue, JournalGroup, record_many
from magnetar.common.latency import LatencyBuckets
from magnetar.runtime import BlockingExecutor, Clock, TaskSupervisor

log = logging.getLogger(__name__)

_APPEND_QUEUE_TIMEOUT_S = 30.0
_CLOSE_DRAIN_TIMEOUT_S = 10.0


class Journal:
    def __init__(
        self,
        directory: str,
        disk: Disk,
        executor: BlockingExecutor,
        clock: Clock,
        supervisor: TaskSupervisor,
        *,
        sync_data: bool = True,
        max_group_wait_ms: float = 2.0,
        flush_when_queue_empty: bool = True,
        group_bytes_max: int = 512 * 1024,
        group_records_max: int = 1000,
        file_size_max_bytes: int = 2 * 1024 * 1024 * 1024,
        queue_size: int = 10_000,
        prealloc_bytes: int = 16 * 1024 * 1024,
        writer_thread: bool | None = None,
    ) -> None:
        self.directory = f"{directory}/current"
        self._files = JournalFiles(
            self.directory,
            disk,
            sync_data=sync_data,
            file_size_max_bytes=file_size_max_bytes,
            prealloc_bytes=prealloc_bytes,
        )
        self._executor = executor
        self._clock = clock
        self._supervisor = supervisor
        self._max_group_wait_s = max(0.0, max_group_wait_ms / 1000.0)
        self._flush_when_queue_empty = flush_when_queue_empty
        self._group_bytes_max = max(1, group_bytes_max)
        self._group_records_max = max(1, group_records_max or 1_000_000)
        self._queue_max = max(1, queue_size)
        # A real executor means real threads: then the writer is a thread of its own.
        self._use_thread = isinstance(executor, BlockingExecutor) if writer_thread is None else writer_thread
        self._nonempty = asyncio.Event()  # the writer task's wake-up (task mode)
        self._groups = GroupQueue(
            clock,
            thread_mode=self._use_thread,
            on_nonempty=self._nonempty.set,
            flush_when_queue_empty=flush_when_queue_empty,
            max_group_wait_s=self._max_group_wait_s,
            group_bytes_max=self._group_bytes_max,
            group_records_max=self._group_records_max,
        )
        self._inflight: JournalGroup | None = None  # taken by the writer task, not yet completed
        self._room = asyncio.Event()
        self._room.set()
        self._writer: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.synced_position = START
        # Records are numbered as they are enqueued; synced_count: every record up to it is durable.
        self.enqueued_count = 0
        self.synced_count = 0
        self.completed_count = 0  # durable or failed
        self.stats = self._files.stats  # groups, records, bytes, fsyncs (counted by the files)
        self.add_latency = LatencyBuckets()  # enqueue -> durable, per record (recorded per group)
        self.sync_latency = LatencyBuckets()  # one group's write + fsync
        # Hooks of the owner (the storage): a durable group's items, and a failed group's error.
        self.on_durable_group: Callable[[list[Any], float], None] | None = None
        self.on_failure: Callable[[Exception], Exception] | None = None

    @property
    def broken(self) -> BaseException | None:
        """Set when a failed write could not even be cut off: the journal refuses appends."""
        return self._files.broken

    @property
    def pending(self) -> int:
        """Records enqueued and not yet durable (or failed)."""
        return self.enqueued_count - self.completed_count

    # --- lifecycle ------------------------------------------------------------------------

    async def replay(
        self,
        mark: JournalPosition,
        apply: Callable[[JournalRecord], None],
        on_progress: Callable[[JournalPosition], Awaitable[None]] | None = None,
    ) -> int:
        """Feed every record after ``mark`` to ``apply`` in order; returns the count.

        Files are read in bounded chunks; after each chunk ``on_progress`` gets the
        position replayed so far (the storage flushes its write cache there when it
        fills).  Torn tails are truncated.  Must run before :meth:`start`."""
        files = self._files
        await self._executor.run(files.makedirs)
        ids = await self._executor.run(files.list_ids)
        count = 0
        for file_id in ids:
            if file_id < mark.file_id:
                continue
            if not await self._executor.run(files.check_header, file_id):
                continue
            offset = (
                mark.offset
                if file_id == mark.file_id and mark.offset > FILE_HEADER_SIZE
                else FILE_HEADER_SIZE
            )
            done = False
            while not done:
                records, offset, done = await self._executor.run(files.scan_chunk, file_id, offset)
                for rec in records:
                    apply(rec)
                    count += 1
                if on_progress is not None:
                    await on_progress(JournalPosition(file_id, offset))
        files.next_file_id = (ids[-1] + 1) if ids else max(1, mark.file_id + 1)
        return count

    def start(self) -> None:
        if self._writer is None:
            self._loop = asyncio.get_running_loop()
            run = self._run_thread() if self._use_thread else self._run_task()
            self._writer = self._supervisor.spawn(run, name="journal-writer")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        deadline = self._clock.monotonic() + _CLOSE_DRAIN_TIMEOUT_S
        while (
            self.pending
            and self._clock.monotonic() < deadline
            and self.broken is None
            and self._writer is not None
            and not self._writer.done()
        ):
            await self._clock.sleep(0.005)
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        if self._thread is not None:
            await self._executor.run(self._thread.join)  # before the files close under it
        for g in self._groups.drain():
            for fut in g.futures:
                if not fut.done():
                    fut.set_exception(BookieUnavailableError("journal closed"))
        await self._executor.run(self._files.close)

    # --- appends --------------------------------------------------------------------------

    async def wait_for_room(self, records: int = 1) -> None:
        """Wait (bounded) until ``records`` more fit in the queue; TooManyRequestsError if not."""
        if self.pending + records <= self._queue_max:
            return
        deadline = self._clock.monotonic() + _APPEND_QUEUE_TIMEOUT_S
        while self.pending + records > self._queue_max:
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0 or self._closed:
                raise TooManyRequestsError("journal queue full")
            self._room.clear()
            try:
                await asyncio.wait_for(self._room.wait(), remaining)
            except TimeoutError:
                pass

    def has_room(self, records: int) -> bool:
        """``records`` more fit in the queue now (then no :meth:`wait_for_room` is needed)."""
        return self.enqueued_count - self.completed_count + records <= self._queue_max

    def append_nowait(
        self, record: JournalRecord, on_durable: Callable[[], None] | None = None
    ) -> asyncio.Future[JournalPosition]:
        """Enqueue ``record`` now (in call order); the future completes once it is durable.
        Raises TooManyRequestsError when the queue is full (see :meth:`wait_for_room`)."""
        return self.append_fields_nowait(
            record.type, record.ledger_id, record.entry_id, record.data, on_durable
        )

    def append_fields_nowait(
        self,
        rtype: RecordType,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        on_durable: Callable[[], None] | None = None,
        *,
        future: asyncio.Future[Any] | None = None,
        item: Any = None,
    ) -> asyncio.Future[Any]:
        """:meth:`append_nowait` without a :class:`JournalRecord` (the storage's add path).
        ``future`` (made here when None) gets the group's position; ``item``, when given,
        goes to the ``on_durable_group`` hook with the rest of its group."""
        if self._closed:
            raise BookieUnavailableError("journal closed")
        if self._files.broken is not None:
            raise BookieError(f"journal is broken: {self._files.broken}")
        if self.enqueued_count - self.completed_count >= self._queue_max:
            raise TooManyRequestsError("journal queue full")
        if future is None:
            future = asyncio.get_running_loop().create_future()
        self.enqueued_count += 1
        self._groups.add(
            encode_record_head(rtype, ledger_id, entry_id, data),
            data,
            future,
            item,
            on_durable,
            self.enqueued_count,
        )
        return future

    async def append(
        self, record: JournalRecord, on_durable: Callable[[], None] | None = None
    ) -> JournalPosition:
        """Write ``record``; returns once it is durable (group commit)."""
        await self.wait_for_room()
        return await self.append_nowait(record, on_durable)

    # --- the writer -----------------------------------------------------------------------

    # thread mode ------------------------------------------------------------------------

    async def _run_thread(self) -> None:
        self._thread = threading.Thread(target=self._thread_main, name="magnetar-journal-writer", daemon=True)
        self._thread.start()
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled (close)
        finally:
            self._groups.stop()

    def _thread_main(self) -> None:
        loop = self._loop
        assert loop is not None
        clock = self._clock
        files = self._files
        while True:
            g = self._groups.next_blocking()
            if g is None:
                return
            t0 = clock.monotonic()
            err: BaseException | None = None
            pos = None
            try:
                pos = files.write_group(g.chunks, g.count)
            except BaseException as exc:  # noqa: BLE001 - handed to the loop, which fails the group
                err = exc
            try:
                loop.call_soon_threadsafe(self._group_done, g, pos, err, t0)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                return

    # task mode (injected executor: simulation, inline disks) -------------------------------

    async def _run_task(self) -> None:
        try:
            await self._task_loop()
        finally:  # cancelled (close) or crashed: nothing taken is left hanging
            g = self._inflight
            if g is not None:
                self._inflight = None
                self._fail_group(g, BookieUnavailableError("journal stopped"))

    async def _task_loop(self) -> None:
        clock = self._clock
        groups = self._groups
        while True:
            g = groups.take()
            if g is None:
                remaining = groups.window_remaining()
                if remaining is not None:  # the group window (journalFlushWhenQueueEmpty off)
                    await clock.sleep(remaining)
                    g = groups.take(window_over=True)
                if g is None:
                    self._nonempty.clear()
                    if groups.empty():
                        groups.set_idle(True)
                        try:
                            await self._nonempty.wait()
                        finally:
                            groups.set_idle(False)
                    continue
            self._inflight = g
            t0 = clock.monotonic()
            try:
                pos = await self._executor.run(self._files.write_group, g.chunks, g.count)
            except Exception as exc:
                self._group_done(g, None, exc, t0)
                continue
            self._group_done(g, pos, None, t0)

    # completion (on the loop) -----------------------------------------------------------

    def _group_done(
        self, g: JournalGroup, pos: JournalPosition | None, err: BaseException | None, t0: float
    ) -> None:
        """The group is durable: callbacks and hook first (write cache), then the mark, then
        the futures.  Or it failed: every future fails, nothing of it is applied."""
        if self._inflight is g:
            self._inflight = None
        if err is not None or pos is None:
            self._fail_group(g, err)
            return
        for cb in g.callbacks:
            try:
                cb()
            except Exception:  # a bug there must not stop the journal
                log.exception("journal on_durable callback failed")
        now = self._clock.monotonic()
        latency_ms = (now - g.opened) * 1000
        if g.items and self.on_durable_group is not None:
            try:
                self.on_durable_group(g.items, latency_ms)
            except Exception:
                log.exception("journal on_durable_group hook failed")
        self.sync_latency.record((now - t0) * 1000)
        record_many(self.add_latency, latency_ms, g.count)
        self.synced_position = pos
        self.synced_count = g.last_seq
        self.completed_count += g.count
        for fut in g.futures:
            if not fut.done():
                fut.set_result(pos)
        if not self._room.is_set():
            self._room.set()

    def _fail_group(self, g: JournalGroup, err: BaseException | None) -> None:
        exc: Exception
        if isinstance(err, OSError):
            if err.errno == errno.ENOSPC:
                exc = DiskFullError(f"journal write failed: {err}")
            else:
                exc = BookieError(f"journal write failed: {err}")
        elif isinstance(err, Exception):
            exc = err if isinstance(err, BookieError) else BookieError(f"journal write failed: {err!r}")
        else:
            exc = BookieUnavailableError(f"journal stopped: {err!r}")
        if self.on_failure is not None:
            exc = self.on_failure(exc)
        self.completed_count += g.count
        for fut in g.futures:
            if not fut.done():
                fut.set_exception(exc)
        if not self._room.is_set():
            self._room.set()

    # --- checkpoints ------------------------------------------------------------------------

    async def delete_files_before(self, mark: JournalPosition) -> int:
        """Delete journal files wholly before ``mark`` (never the one being written)."""
        return await self._executor.run(self._files.delete_before, mark)

    def file_ids(self) -> Iterator[int]:
        return iter(self._files.list_ids())

    def statistics(self) -> dict[str, int]:
        return {**self.stats, "queued": self.pending, "file_id": self._files.file_id}


__all__ = [
    "FILE_HEADER_SIZE",
    "FILE_MAGIC",
    "MAX_RECORD_BYTES",
    "RECORD_OVERHEAD",
    "START",
    "Journal",
    "JournalPosition",
    "JournalRecord",
    "RecordType",
    "ScanResult",
    "journal_file_name",
    "parse_journal_file_name",
    "scan_records",
]
