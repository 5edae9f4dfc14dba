"""The journal's on-disk format: positions, records, file names, and the scanner.

Theory of operation: a journal file starts with a 12-byte header (magic
``MGJ1`` + file id) and holds records framed as
``u32 body length | u32 CRC32-C(body) | body``, the body being
``u8 type | u64 ledger | i64 entry | data``.  :func:`scan_records` parses a
buffer and stops at the first record that is incomplete (the buffer ends
inside it: read more, or it is a torn tail) or corrupt (bad length, CRC or
type: a torn tail); it never returns a record it could not verify.
A :class:`JournalPosition` (file id, offset) orders records across files;
checkpoints store one as their mark.  Pure functions, no I/O.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

import crc32c

FILE_MAGIC = b"MGJ1"
FILE_HEADER = struct.Struct(">4sQ")
FILE_HEADER_SIZE = FILE_HEADER.size
_FRAME = struct.Struct(">II")
_BODY_HEADER = struct.Struct(">BQq")
RECORD_OVERHEAD = _FRAME.size + _BODY_HEADER.size
_RECORD_HEAD = struct.Struct(">IIBQq")  # frame + body header in one pack
assert _RECORD_HEAD.size == RECORD_OVERHEAD
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a length beyond this is garbage, not a record
_crc32c = crc32c.crc32c


class RecordType(enum.IntEnum):
    ADD = 1
    MASTER_KEY = 2
    FENCE = 3


@dataclass(frozen=True, slots=True, order=True)
class JournalPosition:
    file_id: int
    offset: int

    def encode(self) -> bytes:
        return struct.pack(">QQ", self.file_id, self.offset)

    @classmethod
    def decode(cls, data: bytes) -> JournalPosition:
        return cls(*struct.unpack(">QQ", data[:16]))


START = JournalPosition(0, 0)


@dataclass(frozen=True, slots=True)
class JournalRecord:
    type: RecordType
    ledger_id: int
    entry_id: int
    data: bytes

    def encode(self) -> bytes:
        return encode_record_head(self.type, self.ledger_id, self.entry_id, self.data) + self.data


def encode_record_head(rtype: int, ledger_id: int, entry_id: int, data: bytes) -> bytes:
    """The record's frame and body header (25 bytes): the record is this, then ``data``.
    The CRC runs over the body header and ``data`` without joining them (no copy)."""
    crc = _crc32c(data, _crc32c(_BODY_HEADER.pack(rtype, ledger_id, entry_id)))
    return _RECORD_HEAD.pack(_BODY_HEADER.size + len(data), crc, rtype, ledger_id, entry_id)


@dataclass(slots=True)
class ScanResult:
    records: list[JournalRecord] = field(default_factory=list)
    good_end: int = 0  # offset just past the last intact record
    torn: bool = False  # something unreadable follows good_end
    incomplete: bool = False  # ...because the buffer ends inside a plausible record
    next_record_bytes: int = 0  # that record's full size, when its frame header was readable


def scan_records(buf: bytes | memoryview, start: int) -> ScanResult:
    """Parse records from ``buf[start:]``; stop at the first torn or corrupt one."""
    mv = memoryview(buf)
    out = ScanResult(good_end=start)
    pos = start
    while pos < len(mv):
        if len(mv) - pos < _FRAME.size:
            out.torn = out.incomplete = True
            out.next_record_bytes = _FRAME.size
            break
        length, crc = _FRAME.unpack_from(mv, pos)
        end = pos + _FRAME.size + length
        if length < _BODY_HEADER.size or length > MAX_RECORD_BYTES:
            out.torn = True
            break
        if end > len(mv):
            out.torn = out.incomplete = True
            out.next_record_bytes = _FRAME.size + length
            break
        body = mv[pos + _FRAME.size : end]
        if crc32c.crc32c(body) != crc:
            out.torn = True
            break
        rtype, ledger_id, entry_id = _BODY_HEADER.unpack_from(body, 0)
        try:
            kind = RecordType(rtype)
        except ValueError:
            out.torn = True
            break
        out.records.append(JournalRecord(kind, ledger_id, entry_id, bytes(body[_BODY_HEADER.size :])))
        pos = end
        out.good_end = pos
    return out


def journal_file_name(file_id: int) -> str:
    return f"{file_id:016x}.txn"


def parse_journal_file_name(name: str) -> int | None:
    if not name.endswith(".txn"):
        return None
    try:
        return int(name[:-4], 16)
    except ValueError:
        return None
