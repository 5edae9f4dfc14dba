"""The journal: every add is written here and fsynced before it is acknowledged.

Theory of operation (BookKeeper's Journal).  This module is the asynchronous
half: a queue of encoded records and the writer task that commits them in
groups.  The files themselves (format, rotation, preallocation, torn tails,
failed writes) are :mod:`magnetar.bookie.journal_files`, called on the
journal's own executor thread; the record format is journal_format.py.

* ``append_nowait`` encodes the record and queues it synchronously, so
  records keep their callers' order (bounded queue, ``journalQueueSize``;
  ``wait_for_room`` waits for space, ``append`` does both and waits).  A
  record is queued as two byte strings, its 25-byte frame + header and the
  caller's data, so the data is never copied before the group's one write.
* Adaptive group commit: one writer task takes everything queued (up to
  ``journalBufferedWritesThreshold`` bytes and
  ``journalBufferedEntriesThreshold`` records), writes the whole group and
  fsyncs once on the journal thread, off the event loop.  While that fsync
  runs, the next group builds up in the queue: under load groups form by
  themselves.  With ``journalFlushWhenQueueEmpty`` (on by default here) the
  writer flushes as soon as the queue is empty, so a lone writer waits for
  its own fsync only.  With it off, the writer first waits up to
  ``journalMaxGroupWaitMSec`` for more records (BookKeeper's default; it
  trades a lone writer's latency for bigger groups).  Only after the fsync
  are the appends completed (with ``journalSyncData=false`` the fsync is
  skipped: the add is acknowledged once the OS has the bytes).
* Each record may carry an ``on_durable`` callback, run on the event loop
  right after the fsync and *before* :attr:`Journal.synced_position` moves
  past it.  The storage inserts the entry into its write cache there, so a
  checkpoint that reads ``synced_position`` and swaps the write cache in one
  synchronous step never loses an entry between the two (see storage.py).
* A failed write fails every add of its group (none is acknowledged); the
  files cut the half-written group off, or mark the journal *broken*
  (:attr:`broken`), after which appends are refused.
* Replay (restart) feeds every record from the checkpoint mark onward, in
  order, to the storage; a fresh file is then started for new writes.
  Checkpoints delete files wholly before their mark.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
from collections.abc import Awaitable, Callable, Iterator

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
from magnetar.common.latency import LatencyBuckets
from magnetar.runtime import BlockingExecutor, Clock, TaskSupervisor

log = logging.getLogger(__name__)

_APPEND_QUEUE_TIMEOUT_S = 30.0
_CLOSE_DRAIN_TIMEOUT_S = 10.0


class _Pending:
    """One queued record: frame + header, data, and who waits for it."""

    __slots__ = ("head", "data", "future", "on_durable", "seq", "enqueued")

    def __init__(
        self,
        head: bytes,
        data: bytes,
        future: asyncio.Future[JournalPosition],
        on_durable: Callable[[], None] | None,
        seq: int,
        enqueued: float,
    ) -> None:
        self.head = head
        self.data = data
        self.future = future
        self.on_durable = on_durable
        self.seq = seq
        self.enqueued = enqueued  # monotonic s, for bookie_journal_JOURNAL_ADD_ENTRY


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
        # Bounded queue of records waiting for the writer (a deque + events, so that
        # append_nowait can enqueue synchronously, in the caller's order).
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queue_max = max(1, queue_size)
        self._nonempty = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self._batch: list[_Pending] = []  # taken from the queue, not yet completed
        self.synced_position = START
        # Records are numbered as they are enqueued; synced_count: every record up to it is durable.
        self.enqueued_count = 0
        self.synced_count = 0
        self.stats = self._files.stats  # groups, records, bytes, fsyncs (counted by the files)
        self.add_latency = LatencyBuckets()  # enqueue -> durable, per record
        self.sync_latency = LatencyBuckets()  # one group's write + fsync

    @property
    def broken(self) -> BaseException | None:
        """Set when a failed write could not even be cut off: the journal refuses appends."""
        return self._files.broken

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
            self._writer = self._supervisor.spawn(self._run(), name="journal-writer")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        deadline = self._clock.monotonic() + _CLOSE_DRAIN_TIMEOUT_S
        while (
            (self._queue or self._batch)
            and self._clock.monotonic() < deadline
            and self.broken is None
            and self._writer is not None
            and not self._writer.done()
        ):
            await self._clock.sleep(0.005)
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        while self._queue:
            p = self._queue.popleft()
            if not p.future.done():
                p.future.set_exception(BookieUnavailableError("journal closed"))
        await self._executor.run(self._files.close)

    # --- appends --------------------------------------------------------------------------

    async def wait_for_room(self, records: int = 1) -> None:
        """Wait (bounded) until ``records`` more fit in the queue; TooManyRequestsError if not."""
        if len(self._queue) + records <= self._queue_max:
            return
        deadline = self._clock.monotonic() + _APPEND_QUEUE_TIMEOUT_S
        while len(self._queue) + records > self._queue_max:
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
        return len(self._queue) + records <= self._queue_max

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
    ) -> asyncio.Future[JournalPosition]:
        """:meth:`append_nowait` without a :class:`JournalRecord` (the storage's add path)."""
        if self._closed:
            raise BookieUnavailableError("journal closed")
        if self._files.broken is not None:
            raise BookieError(f"journal is broken: {self._files.broken}")
        if len(self._queue) >= self._queue_max:
            raise TooManyRequestsError("journal queue full")
        fut: asyncio.Future[JournalPosition] = asyncio.get_running_loop().create_future()
        self.enqueued_count += 1
        self._queue.append(
            _Pending(
                encode_record_head(rtype, ledger_id, entry_id, data),
                data,
                fut,
                on_durable,
                self.enqueued_count,
                self._clock.monotonic(),
            )
        )
        if not self._nonempty.is_set():
            self._nonempty.set()
        return fut

    async def append(
        self, record: JournalRecord, on_durable: Callable[[], None] | None = None
    ) -> JournalPosition:
        """Write ``record``; returns once it is durable (group commit)."""
        await self.wait_for_room()
        return await self.append_nowait(record, on_durable)

    # --- the writer -----------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._write_loop()
        finally:  # cancelled (close) or crashed: nothing taken from the queue is left hanging
            for p in self._batch:
                if not p.future.done():
                    p.future.set_exception(BookieUnavailableError("journal stopped"))
            self._batch = []

    async def _write_loop(self) -> None:
        clock = self._clock
        while True:
            batch = await self._take_group()
            chunks = []
            for p in batch:
                chunks.append(p.head)
                chunks.append(p.data)
            t0 = clock.monotonic()
            try:
                pos = await self._executor.run(self._files.write_group, chunks, len(batch))
            except OSError as exc:
                err: BookieError
                if exc.errno == errno.ENOSPC:
                    err = DiskFullError(f"journal write failed: {exc}")
                else:
                    err = BookieError(f"journal write failed: {exc}")
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(err)
                self._batch = []
                continue
            except BaseException as exc:
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(BookieUnavailableError(f"journal stopped: {exc!r}"))
                raise
            self._complete(batch, pos, t0)

    def _complete(self, batch: list[_Pending], pos: JournalPosition, t0: float) -> None:
        """The group is durable: callbacks first (write cache), then the mark, then the futures."""
        for p in batch:
            if p.on_durable is not None:
                try:
                    p.on_durable()
                except Exception:  # a bug there must not stop the journal
                    log.exception("journal on_durable callback failed")
        now = self._clock.monotonic()
        self.sync_latency.record((now - t0) * 1000)
        record = self.add_latency.record
        self.synced_position = pos
        self.synced_count = batch[-1].seq
        for p in batch:
            record((now - p.enqueued) * 1000)
            fut = p.future
            if not fut.done():
                fut.set_result(pos)
        self._batch = []

    async def _take_group(self) -> list[_Pending]:
        queue = self._queue
        while not queue:
            self._nonempty.clear()
            await self._nonempty.wait()
        first = queue.popleft()
        batch = self._batch = [first]
        nbytes = len(first.data)
        deadline = self._clock.monotonic() + self._max_group_wait_s
        waited = self._flush_when_queue_empty  # then an empty queue ends the group at once
        records_max = self._group_records_max
        bytes_max = self._group_bytes_max
        while len(batch) < records_max and nbytes < bytes_max:
            if queue:
                item = queue.popleft()
                batch.append(item)
                nbytes += len(item.data)
                continue
            remaining = deadline - self._clock.monotonic()
            if waited or remaining <= 0:
                break
            waited = True
            await self._clock.sleep(remaining)
        if not self._room.is_set():
            self._room.set()
        return batch

    # --- checkpoints ------------------------------------------------------------------------

    async def delete_files_before(self, mark: JournalPosition) -> int:
        """Delete journal files wholly before ``mark`` (never the one being written)."""
        return await self._executor.run(self._files.delete_before, mark)

    def file_ids(self) -> Iterator[int]:
        return iter(self._files.list_ids())

    def statistics(self) -> dict[str, int]:
        return {**self.stats, "queued": len(self._queue), "file_id": self._files.file_id}


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
