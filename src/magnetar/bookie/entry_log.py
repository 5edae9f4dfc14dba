"""Entry logs: where checkpointed entries of many ledgers live, interleaved.

Theory of operation (BookKeeper's EntryLogger): a checkpoint appends the
write cache's entries, sorted by (ledger, entry), to the *active* entry log
``{ledger_dir}/current/{id:016x}.log`` in one write followed by one fsync.
Each record is ``u32 length | u32 CRC32-C | u64 ledger | u64 entry | data``
(length and CRC cover ledger, entry and data), so a read verifies what it
returns and compaction can walk a log record by record.  A log file starts
with a 12-byte header (magic ``MGE1`` + log id).

The active log rotates once it passes ``logSizeLimit``; finished logs are
immutable until garbage collection rewrites their live entries elsewhere and
deletes them.  A restart always starts a new active log, so bytes a crashed
checkpoint wrote past what the index knows are never appended to; they are
dead weight that compaction reclaims.

The logger also counts, per log, how many bytes each ledger has in it
(``usage``).  The storage persists those counts with the index so GC can
compute a log's live fraction without reading it.

All methods block; the storage calls them on its executor (one thread, so
checkpoint flushes and compaction rewrites never interleave).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c

from magnetar.bookie.disk import AppendFile, Disk
from magnetar.bookie.index import Location

LOG_MAGIC = b"MGE1"
_FILE_HEADER = struct.Struct(">4sQ")
FILE_HEADER_SIZE = _FILE_HEADER.size
_REC = struct.Struct(">IIQQ")
RECORD_OVERHEAD = _REC.size
_MAX_RECORD_BYTES = 64 * 1024 * 1024


class EntryLogCorruption(Exception):
    pass


@dataclass(frozen=True, slots=True)
class LoggedEntry:
    location: Location
    ledger_id: int
    entry_id: int
    data: bytes


def log_file_name(log_id: int) -> str:
    return f"{log_id:016x}.log"


def parse_log_file_name(name: str) -> int | None:
    if not name.endswith(".log"):
        return None
    try:
        return int(name[:-4], 16)
    except ValueError:
        return None


_IDS = struct.Struct(">QQ")
# A checkpoint runs this on the storage thread for tens of thousands of entries: every
# GIL_YIELD_MASK + 1 entries it sleeps a moment so the event loop thread, which otherwise
# waits up to the interpreter's 5 ms switch interval for the GIL, gets it at once.
GIL_YIELD_MASK = 255
_GIL_YIELD_S = 0.00005


def yield_gil() -> None:
    time.sleep(_GIL_YIELD_S)


_crc32c = crc32c.crc32c


def encode_record_head(ledger_id: int, entry_id: int, data: bytes) -> bytes:
    """The record's 24-byte header: the record is this, then ``data`` (never copied here)."""
    crc = _crc32c(data, _crc32c(_IDS.pack(ledger_id, entry_id)))
    return _REC.pack(16 + len(data), crc, ledger_id, entry_id)


def encode_record(ledger_id: int, entry_id: int, data: bytes) -> bytes:
    return encode_record_head(ledger_id, entry_id, data) + data


class EntryLogger:
    def __init__(
        self,
        directory: str,
        disk: Disk,
        size_limit_bytes: int,
        allocate_id: Callable[[], int] | None = None,
    ) -> None:
        self.directory = directory
        self._disk = disk
        self._size_limit_bytes = size_limit_bytes
        self._active: AppendFile | None = None
        self.active_log_id = -1
        self._next_log_id = 1
        # Several directories share one id space (EntryLogSet passes its allocator).
        self._allocate_id = allocate_id
        self.active_usage: dict[int, int] = {}

    def open(self) -> None:
        self._disk.makedirs(self.directory)
        ids = self.log_ids()
        self._next_log_id = (ids[-1] + 1) if ids else 1

    def is_active(self, log_id: int) -> bool:
        return log_id == self.active_log_id

    def log_ids(self) -> list[int]:
        ids = (parse_log_file_name(n) for n in self._disk.listdir(self.directory))
        return sorted(i for i in ids if i is not None)

    def path(self, log_id: int) -> str:
        return f"{self.directory}/{log_file_name(log_id)}"

    def log_size(self, log_id: int) -> int:
        return self._disk.size(self.path(log_id))

    def total_bytes(self) -> int:
        return sum(self.log_size(i) for i in self.log_ids())

    # --- writing ---------------------------------------------------------------------------

    def append_batch(
        self, entries: list[tuple[int, int, bytes]]
    ) -> tuple[list[Location], dict[int, dict[int, int]]]:
        """Append and fsync; returns the locations and the usage of every log touched
        (``{log_id: {ledger: bytes}}``, to persist with the index)."""
        locations: list[Location] = []
        touched: dict[int, dict[int, int]] = {}
        chunk: list[bytes] = []
        pending = 0  # bytes in ``chunk``, not yet written
        usage = self.active_usage
        base = self._active.size if self._active is not None else 0
        log_id = self.active_log_id
        crc, ids_pack, rec_pack = _crc32c, _IDS.pack, _REC.pack  # encode_record_head, inlined
        for i, (ledger_id, entry_id, data) in enumerate(entries):
            if i & GIL_YIELD_MASK == GIL_YIELD_MASK:
                yield_gil()
            if self._active is None or base + pending >= self._size_limit_bytes:
                if chunk:
                    self._write(chunk)
                    chunk, pending = [], 0
                if self._active is not None:
                    touched[self.active_log_id] = dict(self.active_usage)
                self._rotate()
                assert self._active is not None
                usage = self.active_usage
                base = self._active.size
                log_id = self.active_log_id
            n = len(data)
            size = RECORD_OVERHEAD + n
            locations.append(Location(log_id, base + pending, size))
            chunk += (
                rec_pack(16 + n, crc(data, crc(ids_pack(ledger_id, entry_id))), ledger_id, entry_id),
                data,
            )
            pending += size
            usage[ledger_id] = usage.get(ledger_id, 0) + size
            if pending >= 4 * 1024 * 1024:
                self._write(chunk)
                chunk, pending = [], 0
                base = self._active.size
        if chunk:
            self._write(chunk)
        if self._active is not None:
            self._active.fsync()
            touched[self.active_log_id] = dict(self.active_usage)
        return locations, touched

    def _write(self, chunk: list[bytes]) -> None:
        assert self._active is not None
        start = self._active.size
        try:
            self._active.write(b"".join(chunk))
        except OSError:
            try:
                self._active.truncate(start)
            except OSError:
                pass
            raise

    def _rotate(self) -> None:
        if self._active is not None:
            self._active.fsync()
            self._active.close()
            self._active = None
        log_id = self._allocate_id() if self._allocate_id is not None else self._next_log_id
        f = self._disk.open_append(self.path(log_id))
        try:
            f.write(_FILE_HEADER.pack(LOG_MAGIC, log_id))
            f.fsync()
            self._disk.sync_dir(self.directory)
        except OSError:
            f.close()
            self._disk.delete(self.path(log_id))
            raise
        self._active = f
        self.active_log_id = log_id
        self._next_log_id = max(self._next_log_id, log_id + 1)
        self.active_usage = {}

    def roll(self) -> None:
        """Finish the active log (next append starts a new one)."""
        if self._active is not None:
            self._active.fsync()
            self._active.close()
            self._active = None
            self.active_log_id = -1
            self.active_usage = {}

    def close(self) -> None:
        self.roll()

    # --- reading ---------------------------------------------------------------------------

    def read(self, loc: Location, ledger_id: int, entry_id: int) -> bytes:
        raw = self._disk.read_at(self.path(loc.log_id), loc.offset, loc.length)
        entry = _decode(raw, loc)
        if entry.ledger_id != ledger_id or entry.entry_id != entry_id:
            raise EntryLogCorruption(
                f"log {loc.log_id} offset {loc.offset} holds {entry.ledger_id}:{entry.entry_id}, "
                f"expected {ledger_id}:{entry_id}"
            )
        return entry.data

    def read_run(
        self, loc: Location, ledger_id: int, entry_id: int, max_bytes: int, max_entries: int
    ) -> list[LoggedEntry]:
        """The entry at ``loc`` plus the entries of the same ledger that follow it in the
        log (ids +1, +2, ...), from one read of up to ``max_bytes``: read-ahead."""
        raw = self._disk.read_at(self.path(loc.log_id), loc.offset, max(loc.length, max_bytes))
        first = _decode(raw[: loc.length], loc)
        if first.ledger_id != ledger_id or first.entry_id != entry_id:
            raise EntryLogCorruption(
                f"log {loc.log_id} offset {loc.offset} holds {first.ledger_id}:{first.entry_id}, "
                f"expected {ledger_id}:{entry_id}"
            )
        out = [first]
        pos = loc.length
        while len(out) < max_entries and pos + RECORD_OVERHEAD <= len(raw):
            length, _crc, lid, eid = _REC.unpack_from(raw, pos)
            total = 8 + length
            if lid != ledger_id or eid != out[-1].entry_id + 1 or pos + total > len(raw) or length < 16:
                break
            try:
                out.append(_decode(raw[pos : pos + total], Location(loc.log_id, loc.offset + pos, total)))
            except EntryLogCorruption:
                break
            pos += total
        return out

    def scan(self, log_id: int) -> Iterator[LoggedEntry]:
        """Every intact record of a log, in order (stops at a torn tail)."""
        buf = self._disk.read_all(self.path(log_id))
        pos = FILE_HEADER_SIZE
        while pos + RECORD_OVERHEAD <= len(buf):
            length = struct.unpack_from(">I", buf, pos)[0]
            total = 8 + length
            if length < 16 or length > _MAX_RECORD_BYTES or pos + total > len(buf):
                return
            try:
                yield _decode(buf[pos : pos + total], Location(log_id, pos, total))
            except EntryLogCorruption:
                return
            pos += total


def _decode(raw: bytes, loc: Location) -> LoggedEntry:
    if len(raw) < RECORD_OVERHEAD:
        raise EntryLogCorruption(f"short read at log {loc.log_id} offset {loc.offset}")
    length, crc, ledger_id, entry_id = _REC.unpack_from(raw, 0)
    if 8 + length != len(raw):
        raise EntryLogCorruption(f"bad record length at log {loc.log_id} offset {loc.offset}")
    mv = memoryview(raw)
    if crc32c.crc32c(mv[8:]) != crc:
        raise EntryLogCorruption(f"CRC mismatch at log {loc.log_id} offset {loc.offset}")
    return LoggedEntry(loc, ledger_id, entry_id, bytes(mv[RECORD_OVERHEAD:]))


class EntryLogSet:
    """Entry logs spread over several ledger directories (``ledgerDirectories``).

    A ledger's entries always go to directory ``ledger_id % n`` (so a ledger's
    entries stay together and read-ahead works); log ids are unique across
    directories, so an index location (log id, offset) names one file.  Same
    interface as :class:`EntryLogger`; with one directory it is a thin wrapper.
    """

    def __init__(self, directories: list[str], disk: Disk, size_limit_bytes: int) -> None:
        self._disk = disk
        self._next_id = 1
        self.loggers = [EntryLogger(d, disk, size_limit_bytes, self._allocate) for d in directories]
        self._dir_of: dict[int, EntryLogger] = {}

    def _allocate(self) -> int:
        log_id = self._next_id
        self._next_id += 1
        return log_id

    def open(self) -> None:
        for lg in self.loggers:
            lg.open()
            for log_id in lg.log_ids():
                if log_id in self._dir_of:
                    raise EntryLogCorruption(f"entry log {log_id} exists in two ledger directories")
                self._dir_of[log_id] = lg
        self._next_id = max(self._dir_of, default=0) + 1

    def _logger(self, log_id: int) -> EntryLogger:
        lg = self._dir_of.get(log_id)
        if lg is None:
            raise FileNotFoundError(f"no entry log {log_id}")
        return lg

    def log_ids(self) -> list[int]:
        return sorted(self._dir_of)

    def is_active(self, log_id: int) -> bool:
        return any(lg.is_active(log_id) for lg in self.loggers)

    def path(self, log_id: int) -> str:
        return self._logger(log_id).path(log_id)

    def log_size(self, log_id: int) -> int:
        return self._logger(log_id).log_size(log_id)

    def total_bytes(self) -> int:
        return sum(lg.total_bytes() for lg in self.loggers)

    def append_batch(
        self, entries: list[tuple[int, int, bytes]]
    ) -> tuple[list[Location], dict[int, dict[int, int]]]:
        n = len(self.loggers)
        if n == 1:  # one ledger directory: no split, and the log ids once per batch
            lg = self.loggers[0]
            locs, usage = lg.append_batch(entries)
            for log_id in usage:
                self._dir_of[log_id] = lg
            return locs, usage
        by_dir: dict[int, list[int]] = {}
        for i, (ledger_id, _, _) in enumerate(entries):
            by_dir.setdefault(ledger_id % n, []).append(i)
        locations: list[Location | None] = [None] * len(entries)
        touched: dict[int, dict[int, int]] = {}
        for d, idxs in sorted(by_dir.items()):
            lg = self.loggers[d]
            locs, usage = lg.append_batch([entries[i] for i in idxs])
            for i, loc in zip(idxs, locs, strict=True):
                locations[i] = loc
                self._dir_of[loc.log_id] = lg
            touched.update(usage)
        return [loc for loc in locations if loc is not None], touched

    def read(self, loc: Location, ledger_id: int, entry_id: int) -> bytes:
        return self._logger(loc.log_id).read(loc, ledger_id, entry_id)

    def read_run(
        self, loc: Location, ledger_id: int, entry_id: int, max_bytes: int, max_entries: int
    ) -> list[LoggedEntry]:
        return self._logger(loc.log_id).read_run(loc, ledger_id, entry_id, max_bytes, max_entries)

    def scan(self, log_id: int) -> Iterator[LoggedEntry]:
        return self._logger(log_id).scan(log_id)

    def delete(self, log_id: int) -> None:
        lg = self._dir_of.pop(log_id, None)
        if lg is not None:
            self._disk.delete(lg.path(log_id))

    def roll(self) -> None:
        for lg in self.loggers:
            lg.roll()

    def close(self) -> None:
        for lg in self.loggers:
            lg.close()
