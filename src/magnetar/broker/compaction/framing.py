"""Framing of compacted-ledger entries: the original position before the stored bytes.

Theory of operation: an entry of a compacted ledger is a message (or a batch)
that survived compaction.  Readers of the compacted view must see it at the
position it had in the topic -- consumers acknowledge and seek by that
position, and the compacted view finds its way in the compacted ledger by
binary search over it -- so every compacted entry carries the original
``(ledger_id, entry_id)`` in a fixed 19-byte header (Pulsar serialises a
MessageIdData in front of each compacted entry for the same reason)::

    [0x0c 0x0d]  magic
    [u8]         format version (1)
    [i64 BE]     original ledger id
    [i64 BE]     original entry id
    [...]        the stored entry bytes: [0x0e02 block]? [0x0e01][crc][md size][metadata][payload]

The stored bytes are exactly what the broker would have dispatched (for a
batch with compacted-out messages: re-encoded, with a fresh CRC), so a
dispatcher strips the header and sends the rest behind a CommandMessage.
"""

from __future__ import annotations

import struct

from magnetar.broker.compaction.errors import CompactedLedgerCorrupt
from magnetar.managed_ledger.api import Position

MAGIC = b"\x0c\x0d"
VERSION = 1
_HEADER = struct.Struct(">2sBqq")
HEADER_SIZE = _HEADER.size  # 19


def encode_compacted_entry(position: Position, stored: bytes) -> bytes:
    """The compacted-ledger entry for ``stored`` that was at ``position`` in the topic."""
    return _HEADER.pack(MAGIC, VERSION, position.ledger_id, position.entry_id) + stored


def decode_position(data: bytes | memoryview) -> Position:
    """Only the original position (binary search reads nothing else)."""
    if len(data) < HEADER_SIZE:
        raise CompactedLedgerCorrupt(f"compacted entry of {len(data)} bytes is shorter than its header")
    magic, version, ledger_id, entry_id = _HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        raise CompactedLedgerCorrupt(f"not a compacted entry (magic {magic!r}, version {version})")
    return Position(ledger_id, entry_id)


def decode_compacted_entry(data: bytes) -> tuple[Position, bytes]:
    """(original position, stored bytes)."""
    position = decode_position(data)
    return position, data[HEADER_SIZE:]
