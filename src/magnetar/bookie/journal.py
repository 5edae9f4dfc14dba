"""The journal: every add is written here and fsynced before it is acknowledged.

Theory of operation (BookKeeper's Journal):

* Records are appended to journal files ``{journal_dir}/current/{id:016x}.txn``.
  Each file starts with a 12-byte header (magic ``MGJ1`` + file id) and holds
  records framed as ``u32 body length | u32 CRC32-C(body) | body`` where the
  body is ``u8 type | u64 ledger | i64 entry | data``.  Types: ADD (data = the
  framed entry), MASTER_KEY (data = the ledger's key) and FENCE.
* Group commit: ``append_nowait`` queues the encoded record synchronously,
  so records keep their callers' order (bounded queue, ``journalQueueSize``;
  ``wait_for_room`` waits for space, ``append`` does both and waits).  One writer task takes everything queued
  (up to ``journalBufferedWritesThreshold`` bytes and
  ``journalBufferedEntriesThreshold`` records), then writes the whole group
  and fsyncs once on the journal's own executor thread, off the event loop.
  While that fsync runs, the next group builds up in the queue: grouping
  happens by itself under load.  So with ``journalFlushWhenQueueEmpty`` (on
  by default here) the writer flushes as soon as the queue is empty, and a
  lone writer waits for its own fsync only.  With it off, the writer waits up
  to ``journalMaxGroupWaitMSec`` for more records first (BookKeeper's
  default; it trades a lone writer's latency for bigger groups).  Only after
  the fsync are the appends completed (with ``journalSyncData=false`` the
  fsync is skipped: the add is acknowledged once the OS has the bytes).
* Each record may carry an ``on_durable`` callback, run on the event loop
  right after the fsync and *before* :attr:`Journal.synced_position` moves
  past it.  The storage inserts the entry into its write cache there, so a
  checkpoint that reads ``synced_position`` and swaps the write cache in one
  synchronous step never loses an entry between the two (see storage.py).
* Files are preallocated ``journalPreAllocSizeMB`` at a time (zero-filled
  room written in place; cut back on rotation and close, and a zero tail left
  by a crash is cut quietly on replay).  Files rotate at ``journalMaxSizeMB``.
  A checkpoint names a :class:`JournalPosition`; files wholly before it are
  deleted.
* A failed write (ENOSPC, EIO) fails every add of its group (none is
  acknowledged) and cuts the file back to where the group started, so the
  journal never holds a half record in the middle.  If even that fails the
  journal is *broken* and refuses further appends.
* Replay (restart): records from the checkpoint mark onward are read back in
  order.  The first record whose length runs past the end of the file or
  whose CRC does not match is a torn tail (a crash mid-write): the file is
  truncated there, and nothing after it is trusted.  A fresh file is then
  started for new writes.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from magnetar.bookie.api import BookieError, BookieUnavailableError, DiskFullError, TooManyRequestsError
from magnetar.bookie.disk import AppendFile, Disk
from magnetar.bookie.journal_format import (
    FILE_HEADER,
    FILE_HEADER_SIZE,
    FILE_MAGIC,
    MAX_RECORD_BYTES,
    RECORD_OVERHEAD,
    START,
    JournalPosition,
    JournalRecord,
    RecordType,
    ScanResult,
    journal_file_name,
    parse_journal_file_name,
    scan_records,
)
from magnetar.common.latency import LatencyBuckets
from magnetar.runtime import BlockingExecutor, Clock, TaskSupervisor

log = logging.getLogger(__name__)

_APPEND_QUEUE_TIMEOUT_S = 30.0
_REPLAY_CHUNK_BYTES = 4 * 1024 * 1024
_CLOSE_DRAIN_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _Pending:
    data: bytes
    future: asyncio.Future[JournalPosition]
    on_durable: Callable[[], None] | None = None
    seq: int = 0
    enqueued: float = 0.0  # monotonic s, for bookie_journal_JOURNAL_ADD_ENTRY


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
        self._disk = disk
        self._executor = executor
        self._clock = clock
        self._supervisor = supervisor
        self._sync_data = sync_data
        self._max_group_wait_s = max(0.0, max_group_wait_ms / 1000.0)
        self._flush_when_queue_empty = flush_when_queue_empty
        self._group_bytes_max = max(1, group_bytes_max)
        self._group_records_max = max(1, group_records_max or 1_000_000)
        self._file_size_max_bytes = file_size_max_bytes
        self._prealloc_bytes = prealloc_bytes  # journalPreAllocSizeMB
        self._prealloc_end = 0
        # Bounded queue of records waiting for the writer (a deque + events, so that
        # append_nowait can enqueue synchronously, in the caller's order).
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queue_max = max(1, queue_size)
        self._nonempty = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._file: AppendFile | None = None
        self._file_id = 0
        self._next_file_id = 1
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self._batch: list[_Pending] = []  # taken from the queue, not yet completed
        self.broken: BaseException | None = None
        self.synced_position = START
        # Records are numbered as they are enqueued; synced_count: every record up to it is durable.
        self.enqueued_count = 0
        self.synced_count = 0
        self.stats = {"groups": 0, "records": 0, "bytes": 0, "fsyncs": 0}
        self.add_latency = LatencyBuckets()  # enqueue -> durable, per record
        self.sync_latency = LatencyBuckets()  # one group's write + fsync

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
        await self._executor.run(self._disk.makedirs, self.directory)
        ids = await self._executor.run(self._list_ids)
        count = 0
        for file_id in ids:
            if file_id < mark.file_id:
                continue
            if not await self._executor.run(self._check_header, file_id):
                continue
            offset = (
                mark.offset
                if file_id == mark.file_id and mark.offset > FILE_HEADER_SIZE
                else FILE_HEADER_SIZE
            )
            done = False
            while not done:
                records, offset, done = await self._executor.run(self._scan_chunk, file_id, offset)
                for rec in records:
                    apply(rec)
                    count += 1
                if on_progress is not None:
                    await on_progress(JournalPosition(file_id, offset))
        self._next_file_id = (ids[-1] + 1) if ids else max(1, mark.file_id + 1)
        return count

    def _list_ids(self) -> list[int]:
        ids = [parse_journal_file_name(n) for n in self._disk.listdir(self.directory)]
        return sorted(i for i in ids if i is not None)

    def _path(self, file_id: int) -> str:
        return f"{self.directory}/{journal_file_name(file_id)}"

    def _check_header(self, file_id: int) -> bool:
        path = self._path(file_id)
        head = self._disk.read_at(path, 0, FILE_HEADER_SIZE)
        if len(head) < FILE_HEADER_SIZE:
            log.warning("journal %s: header torn (%d bytes); truncating to empty", path, len(head))
            self._disk.truncate(path, 0)
            return False
        magic, fid = FILE_HEADER.unpack_from(head, 0)
        if magic != FILE_MAGIC or fid != file_id:
            raise BookieError(f"journal file {path} has a bad header ({magic!r}, id {fid})")
        return True

    def _scan_chunk(self, file_id: int, offset: int) -> tuple[list[JournalRecord], int, bool]:
        """Records from ``offset`` in one bounded read: (records, next offset, file done)."""
        path = self._path(file_id)
        size = self._disk.size(path)
        if offset >= size:
            return [], offset, True
        buf = self._disk.read_at(path, offset, min(_REPLAY_CHUNK_BYTES, size - offset))
        res = scan_records(buf, 0)
        end = offset + res.good_end
        if not res.torn:
            return res.records, end, end >= size
        if res.incomplete and offset + len(buf) < size:
            if res.good_end > 0:
                return res.records, end, False  # the next read starts at the split record
            if offset + res.next_record_bytes <= size:  # one record bigger than a chunk
                whole = scan_records(self._disk.read_at(path, offset, res.next_record_bytes), 0)
                if not whole.torn:
                    end = offset + whole.good_end
                    return whole.records, end, end >= size
        tail = buf[res.good_end : res.good_end + 64]
        if tail.count(0) == len(tail):  # the zero-filled room preallocation left: not a torn write
            log.debug("journal %s: cutting preallocated tail at %d", path, end)
        else:
            log.warning("journal %s: torn tail at offset %d (%d bytes dropped)", path, end, size - end)
        self._disk.truncate(path, end)
        return res.records, end, True

    def start(self) -> None:
        if self._writer is None:
            self._writer = self._supervisor.spawn(self._run(), name="journal-writer")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        deadline = self._clock.monotonic() + _CLOSE_DRAIN_TIMEOUT_S
        while (
            (self._queue or self._in_flight)
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
        if self._file is not None:
            await self._executor.run(self._close_file)

    def _close_file(self) -> None:
        if self._file is not None:
            try:
                self._file.truncate(self._file.size)  # drop the preallocated zeros
                self._file.fsync()
            finally:
                self._file.close()
                self._file = None

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

    def append_nowait(
        self, record: JournalRecord, on_durable: Callable[[], None] | None = None
    ) -> asyncio.Future[JournalPosition]:
        """Enqueue ``record`` now (in call order); the future completes once it is durable.
        Raises TooManyRequestsError when the queue is full (see :meth:`wait_for_room`)."""
        if self._closed:
            raise BookieUnavailableError("journal closed")
        if self.broken is not None:
            raise BookieError(f"journal is broken: {self.broken}")
        if len(self._queue) >= self._queue_max:
            raise TooManyRequestsError("journal queue full")
        fut: asyncio.Future[JournalPosition] = asyncio.get_running_loop().create_future()
        self.enqueued_count += 1
        self._queue.append(
            _Pending(record.encode(), fut, on_durable, self.enqueued_count, self._clock.monotonic())
        )
        self._nonempty.set()
        return fut

    async def append(
        self, record: JournalRecord, on_durable: Callable[[], None] | None = None
    ) -> JournalPosition:
        """Write ``record``; returns once it is durable (group commit)."""
        await self.wait_for_room()
        return await self.append_nowait(record, on_durable)

    async def _run(self) -> None:
        try:
            await self._write_loop()
        finally:  # cancelled (close) or crashed: nothing taken from the queue is left hanging
            for p in self._batch:
                if not p.future.done():
                    p.future.set_exception(BookieUnavailableError("journal stopped"))
            self._batch = []

    @property
    def _in_flight(self) -> int:
        return len(self._batch)

    async def _write_loop(self) -> None:
        while True:
            batch = await self._take_group()
            t0 = self._clock.monotonic()
            try:
                pos = await self._executor.run(self._write_group, [p.data for p in batch])
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
            for p in batch:
                if p.on_durable is not None:
                    try:
                        p.on_durable()
                    except Exception:  # a bug there must not stop the journal
                        log.exception("journal on_durable callback failed")
            now = self._clock.monotonic()
            self.sync_latency.record((now - t0) * 1000)
            for p in batch:
                self.add_latency.record((now - p.enqueued) * 1000)
            self.synced_position = pos
            self.synced_count = batch[-1].seq
            for p in batch:
                if not p.future.done():
                    p.future.set_result(pos)
            self._batch = []

    async def _take_group(self) -> list[_Pending]:
        while not self._queue:
            self._nonempty.clear()
            await self._nonempty.wait()
        first = self._queue.popleft()
        batch = self._batch = [first]
        nbytes = len(first.data)
        deadline = self._clock.monotonic() + self._max_group_wait_s
        waited = self._flush_when_queue_empty  # then an empty queue ends the group at once
        queue = self._queue
        while len(batch) < self._group_records_max and nbytes < self._group_bytes_max:
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
        self._room.set()
        return batch

    def _write_group(self, chunks: list[bytes]) -> JournalPosition:
        """On the journal thread: one write, one fsync."""
        if self.broken is not None:
            raise OSError(errno.EIO, f"journal broken: {self.broken}")
        if self._file is None or self._file.size >= self._file_size_max_bytes:
            self._rotate()
        f = self._file
        assert f is not None
        start = f.size
        data = b"".join(chunks)
        if start + len(data) > self._prealloc_end and self._prealloc_bytes > 0:
            prealloc = getattr(f, "preallocate", None)
            if prealloc is not None:
                prealloc(max(self._prealloc_bytes, len(data)))
                self._prealloc_end = start + max(self._prealloc_bytes, len(data))
        try:
            f.write(data)
            if self._sync_data:
                f.fsync()
                self.stats["fsyncs"] += 1
        except OSError:
            try:
                f.truncate(start)
                f.fsync()
            except OSError as exc2:
                self.broken = exc2
            raise
        self.stats["groups"] += 1
        self.stats["records"] += len(chunks)
        self.stats["bytes"] += len(data)
        return JournalPosition(self._file_id, f.size)

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.truncate(self._file.size)  # drop the preallocated zeros
            self._file.fsync()
            self._file.close()
            self._file = None
        file_id = self._next_file_id
        self._disk.makedirs(self.directory)
        f = self._disk.open_append(f"{self.directory}/{journal_file_name(file_id)}")
        try:
            if f.size:
                f.truncate(0)
            f.write(FILE_HEADER.pack(FILE_MAGIC, file_id))
            f.fsync()
            self._disk.sync_dir(self.directory)
        except OSError:
            f.close()
            raise
        self._file = f
        self._prealloc_end = 0
        self._file_id = file_id
        self._next_file_id = file_id + 1

    # --- checkpoints ------------------------------------------------------------------------

    async def delete_files_before(self, mark: JournalPosition) -> int:
        """Delete journal files wholly before ``mark`` (never the one being written)."""
        return await self._executor.run(self._delete_before, mark)

    def _delete_before(self, mark: JournalPosition) -> int:
        n = 0
        for file_id in self._list_ids():
            if file_id < mark.file_id and file_id != self._file_id:
                self._disk.delete(f"{self.directory}/{journal_file_name(file_id)}")
                n += 1
        return n

    def file_ids(self) -> Iterator[int]:
        return iter(self._list_ids())

    def statistics(self) -> dict[str, int]:
        return {**self.stats, "queued": len(self._queue), "file_id": self._file_id}


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
