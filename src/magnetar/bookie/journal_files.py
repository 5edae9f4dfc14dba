"""The journal's files on disk: the one being appended to, rotation, replay reads.

Theory of operation: :class:`JournalFiles` is the blocking half of the
journal (:mod:`magnetar.bookie.journal` is the asynchronous half that queues
records and forms groups).  Every method here does file I/O and runs on the
journal's own executor thread, one call at a time, never on the event loop.

* Files are ``{journal_dir}/current/{id:016x}.txn``; each starts with a
  12-byte header (magic ``MGJ1`` + file id, fsynced with the directory when
  the file is made) followed by records (format: journal_format.py).
* :meth:`write_group` writes one group of encoded records with one write and
  one fsync (``journalSyncData``; without it the OS has the bytes, no more).
  It returns the :class:`JournalPosition` just past the group.
* Room is preallocated ``journalPreAllocSizeMB`` at a time (zero-filled,
  written in place so fdatasync needs no size update); it is cut back on
  rotation and close.  Files rotate at ``journalMaxSizeMB``.
* A failed write (ENOSPC, EIO) cuts the file back to where the group started
  and re-raises, so no half record stays in the middle of a file; if even
  that fails :attr:`broken` is set and every later write fails at once.
* Replay reads a file in bounded chunks (:meth:`scan_chunk`).  The first
  record that runs past the end or fails its CRC is a torn tail: the file is
  truncated there (quietly when the tail is preallocated zeros).
"""

from __future__ import annotations

import errno
import logging

from magnetar.bookie.api import BookieError
from magnetar.bookie.disk import AppendFile, Disk
from magnetar.bookie.journal_format import (
    FILE_HEADER,
    FILE_HEADER_SIZE,
    FILE_MAGIC,
    JournalPosition,
    JournalRecord,
    journal_file_name,
    parse_journal_file_name,
    scan_records,
)

log = logging.getLogger(__name__)

_REPLAY_CHUNK_BYTES = 4 * 1024 * 1024


class JournalFiles:
    def __init__(
        self,
        directory: str,
        disk: Disk,
        *,
        sync_data: bool,
        file_size_max_bytes: int,
        prealloc_bytes: int,
    ) -> None:
        self.directory = directory
        self._disk = disk
        self._sync_data = sync_data
        self._file_size_max_bytes = file_size_max_bytes
        self._prealloc_bytes = prealloc_bytes  # journalPreAllocSizeMB
        self._prealloc_end = 0
        self._file: AppendFile | None = None
        self.file_id = 0
        self.next_file_id = 1
        self.broken: BaseException | None = None
        self.stats = {"groups": 0, "records": 0, "bytes": 0, "fsyncs": 0}

    # --- names --------------------------------------------------------------------------

    def list_ids(self) -> list[int]:
        ids = [parse_journal_file_name(n) for n in self._disk.listdir(self.directory)]
        return sorted(i for i in ids if i is not None)

    def path(self, file_id: int) -> str:
        return f"{self.directory}/{journal_file_name(file_id)}"

    def makedirs(self) -> None:
        self._disk.makedirs(self.directory)

    # --- replay ---------------------------------------------------------------------------

    def check_header(self, file_id: int) -> bool:
        """True if the file has its header; a torn header empties the file (False)."""
        path = self.path(file_id)
        head = self._disk.read_at(path, 0, FILE_HEADER_SIZE)
        if len(head) < FILE_HEADER_SIZE:
            log.warning("journal %s: header torn (%d bytes); truncating to empty", path, len(head))
            self._disk.truncate(path, 0)
            return False
        magic, fid = FILE_HEADER.unpack_from(head, 0)
        if magic != FILE_MAGIC or fid != file_id:
            raise BookieError(f"journal file {path} has a bad header ({magic!r}, id {fid})")
        return True

    def scan_chunk(self, file_id: int, offset: int) -> tuple[list[JournalRecord], int, bool]:
        """Records from ``offset`` in one bounded read: (records, next offset, file done)."""
        path = self.path(file_id)
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

    # --- writes ---------------------------------------------------------------------------

    def write_group(self, chunks: list[bytes], records: int) -> JournalPosition:
        """One write, one fsync (when syncing); ``chunks`` are whole encoded records."""
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
        self.stats["records"] += records
        self.stats["bytes"] += len(data)
        return JournalPosition(self.file_id, f.size)

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.truncate(self._file.size)  # drop the preallocated zeros
            self._file.fsync()
            self._file.close()
            self._file = None
        file_id = self.next_file_id
        self._disk.makedirs(self.directory)
        f = self._disk.open_append(self.path(file_id))
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
        self.file_id = file_id
        self.next_file_id = file_id + 1

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.truncate(self._file.size)  # drop the preallocated zeros
                self._file.fsync()
            finally:
                self._file.close()
                self._file = None

    # --- checkpoints ----------------------------------------------------------------------

    def delete_before(self, mark: JournalPosition) -> int:
        """Delete files wholly before ``mark`` (never the one being written)."""
        n = 0
        for file_id in self.list_ids():
            if file_id < mark.file_id and file_id != self.file_id:
                self._disk.delete(self.path(file_id))
                n += 1
        return n
