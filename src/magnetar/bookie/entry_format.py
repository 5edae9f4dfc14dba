"""The framed entry every bookie stores (client-side digest format).

Theory of operation: the ledger client frames every entry it writes as

    ledger_id   u64 big-endian
    entry_id    u64 big-endian
    lac         i64 big-endian   (writer's last-add-confirmed when it sent this entry)
    length      u64 big-endian   (total ledger length in bytes including this entry)
    digest      u32 big-endian   CRC32-C of the 32 header bytes above + payload
    payload     the rest

as BookKeeper's DigestManager does (CRC32C digest type).  The bookie reads the
header to index the entry and to track the LAC; the reader verifies the
digest so corruption anywhere on the way is caught, never returned.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

_HEADER = struct.Struct(">QQqQ")
HEADER_SIZE = _HEADER.size  # 32
DIGEST_SIZE = 4
OVERHEAD = HEADER_SIZE + DIGEST_SIZE


class DigestMismatch(Exception):
    pass


class MalformedEntry(Exception):
    pass


@dataclass(frozen=True, slots=True)
class EntryHeader:
    ledger_id: int
    entry_id: int
    lac: int
    length: int


def encode_entry(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
    header = _HEADER.pack(ledger_id, entry_id, lac, length)
    digest = crc32c.crc32c(payload, crc32c.crc32c(header))
    return b"".join((header, digest.to_bytes(4, "big"), payload))


def parse_header(entry: bytes | memoryview) -> EntryHeader:
    if len(entry) < OVERHEAD:
        raise MalformedEntry(f"entry of {len(entry)} bytes is shorter than its {OVERHEAD}-byte header")
    return EntryHeader(*_HEADER.unpack_from(entry, 0))


def header_fields(entry: bytes | memoryview) -> tuple[int, int, int, int]:
    """(ledger_id, entry_id, lac, length) as a tuple: :func:`parse_header` without the
    object, for the bookie's add path."""
    if len(entry) < OVERHEAD:
        raise MalformedEntry(f"entry of {len(entry)} bytes is shorter than its {OVERHEAD}-byte header")
    return _HEADER.unpack_from(entry, 0)


def decode_entry(
    entry: bytes, expect_ledger: int | None = None, expect_entry: int | None = None
) -> tuple[EntryHeader, bytes]:
    """Verify the digest and return (header, payload)."""
    header = parse_header(entry)
    mv = memoryview(entry)
    want = int.from_bytes(mv[HEADER_SIZE:OVERHEAD], "big")
    got = crc32c.crc32c(mv[OVERHEAD:], crc32c.crc32c(mv[:HEADER_SIZE]))
    if want != got:
        raise DigestMismatch(
            f"digest mismatch on ledger {header.ledger_id} entry {header.entry_id}: stored {want:#010x}, computed {got:#010x}"
        )
    if expect_ledger is not None and header.ledger_id != expect_ledger:
        raise DigestMismatch(f"entry belongs to ledger {header.ledger_id}, expected {expect_ledger}")
    if expect_entry is not None and header.entry_id != expect_entry:
        raise DigestMismatch(f"entry has id {header.entry_id}, expected {expect_entry}")
    return header, bytes(mv[OVERHEAD:])
