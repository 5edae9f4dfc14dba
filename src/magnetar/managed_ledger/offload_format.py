"""The bytes of an offloaded ledger: a data object of blocks and an index object.

Theory of operation
-------------------
An offloaded ledger is two objects (Pulsar's data + index design), named after
the offload's uid and the ledger id (:func:`object_names`):

``{uid}-ledger-{ledgerId}`` -- the data object::

    header:  DATA_MAGIC(8) | meta_len u32 | crc32c(meta) u32 | meta (JSON)
    blocks:  BLOCK_MAGIC u32 | payload_len u32 | first_entry_id i64 | entry_count u32
             | crc32c(payload) u32 | payload
    payload: entries, each  entry_id i64 | len u32 | data

``{uid}-ledger-{ledgerId}-index`` -- the index object::

    INDEX_MAGIC(8) | body_len u32 | crc32c(body) u32 | body
    body:    meta_len u32 | meta (JSON) | n_blocks u32
             | n_blocks x (first_entry_id i64 | entry_count u32 | offset u64 | length u32)
             | data_object_length u64

``meta`` is the ledger's metadata (id, last entry, length, quorums, custom
metadata, the managed ledger's name, the uid) -- in both objects, so either
one alone says what it is.  A block holds whole entries and at most
``block_size`` bytes of payload (an entry larger than that gets a block of its
own); it is the unit of checksum, of the index and of a ranged read, so a
reader of a few entries fetches only their blocks.

Every decode checks magic, lengths and CRC32-C and raises
:class:`CorruptObjectError` with what was wrong: a damaged object is a clear
read error, never wrong data.  This module is pure: bytes in, bytes out.
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

from magnetar.managed_ledger.offload import OffloadError

DATA_MAGIC = b"MGTOFFD1"
INDEX_MAGIC = b"MGTOFFI1"
BLOCK_MAGIC = 0x4D474231
_HEAD = struct.Struct(">8sII")  # magic, length, crc
_BLOCK = struct.Struct(">IIqII")  # magic, payload_len, first_entry_id, entry_count, crc
_ENTRY = struct.Struct(">qI")  # entry_id, len
_ROW = struct.Struct(">qIQI")  # first_entry_id, entry_count, offset, length
BLOCK_HEADER_SIZE = _BLOCK.size
META_BYTES_MAX = 1024 * 1024
INDEX_BLOCKS_MAX = 50_000_000


class CorruptObjectError(OffloadError):
    """An offloaded object failed a magic, length or checksum check."""


def object_names(uid: str, ledger_id: int) -> tuple[str, str]:
    data = f"{uid}-ledger-{ledger_id}"
    return data, data + "-index"


@dataclass(frozen=True)
class BlockRef:
    first_entry_id: int
    entry_count: int
    offset: int
    length: int  # header + payload

    @property
    def last_entry_id(self) -> int:
        return self.first_entry_id + self.entry_count - 1


@dataclass(frozen=True)
class OffloadIndex:
    meta: dict
    blocks: tuple[BlockRef, ...]
    data_length: int

    def blocks_for(self, first: int, last: int) -> list[int]:
        """Indexes of the blocks holding entries first..last."""
        starts = [b.first_entry_id for b in self.blocks]
        i = max(0, bisect.bisect_right(starts, first) - 1)
        out = []
        while i < len(self.blocks) and self.blocks[i].first_entry_id <= last:
            if self.blocks[i].last_entry_id >= first:
                out.append(i)
            i += 1
        return out


def _head(magic: bytes, body: bytes) -> bytes:
    return _HEAD.pack(magic, len(body), crc32c.crc32c(body)) + body


def encode_data_header(meta: dict) -> bytes:
    return _head(DATA_MAGIC, json.dumps(meta, sort_keys=True).encode())


def decode_data_header(raw: bytes) -> tuple[dict, int]:
    """(meta, header size) of a data object's first bytes."""
    if len(raw) < _HEAD.size:
        raise CorruptObjectError("data object shorter than its header")
    magic, n, crc = _HEAD.unpack_from(raw)
    if magic != DATA_MAGIC:
        raise CorruptObjectError(f"data object has bad magic {magic!r}")
    if n > META_BYTES_MAX or len(raw) < _HEAD.size + n:
        raise CorruptObjectError("data object header truncated")
    body = raw[_HEAD.size : _HEAD.size + n]
    if crc32c.crc32c(body) != crc:
        raise CorruptObjectError("data object header checksum mismatch")
    return json.loads(body), _HEAD.size + n


def encode_block(entries: list[tuple[int, bytes]]) -> bytes:
    payload = b"".join(_ENTRY.pack(eid, len(d)) + d for eid, d in entries)
    head = _BLOCK.pack(BLOCK_MAGIC, len(payload), entries[0][0], len(entries), crc32c.crc32c(payload))
    return head + payload


def decode_block(raw: bytes, ref: BlockRef) -> list[tuple[int, bytes]]:
    """The entries of one block, checked against its header and the index row."""
    if len(raw) != ref.length or len(raw) < _BLOCK.size:
        raise CorruptObjectError(f"block at {ref.offset}: got {len(raw)} bytes, index says {ref.length}")
    magic, n, first, count, crc = _BLOCK.unpack_from(raw)
    if magic != BLOCK_MAGIC or n != len(raw) - _BLOCK.size:
        raise CorruptObjectError(f"block at {ref.offset}: bad header")
    if first != ref.first_entry_id or count != ref.entry_count:
        raise CorruptObjectError(f"block at {ref.offset}: holds {first}+{count}, index says otherwise")
    payload = memoryview(raw)[_BLOCK.size :]
    if crc32c.crc32c(payload) != crc:
        raise CorruptObjectError(f"block at {ref.offset} (entries {first}..): checksum mismatch")
    out = []
    pos = 0
    for expect in range(first, first + count):
        if pos + _ENTRY.size > len(payload):
            raise CorruptObjectError(f"block at {ref.offset}: entry {expect} truncated")
        eid, dlen = _ENTRY.unpack_from(payload, pos)
        pos += _ENTRY.size
        if eid != expect or pos + dlen > len(payload):
            raise CorruptObjectError(f"block at {ref.offset}: entry {expect} malformed")
        out.append((eid, bytes(payload[pos : pos + dlen])))
        pos += dlen
    return out


class BlockBuilder:
    """Groups entries into blocks of at most ``block_size`` payload bytes."""

    def __init__(self, block_size: int) -> None:
        self._block_size = max(1, block_size)
        self._entries: list[tuple[int, bytes]] = []
        self._bytes = 0

    def add(self, entry_id: int, data: bytes) -> bytes | None:
        """Add an entry; returns a finished block when this entry did not fit in the current one."""
        size = _ENTRY.size + len(data)
        out = None
        if self._entries and self._bytes + size > self._block_size:
            out = self.flush()
        self._entries.append((entry_id, data))
        self._bytes += size
        return out

    def flush(self) -> bytes | None:
        if not self._entries:
            return None
        block = encode_block(self._entries)
        self._entries, self._bytes = [], 0
        return block


def block_ref_of(block: bytes, offset: int) -> BlockRef:
    _, _, first, count, _ = _BLOCK.unpack_from(block)
    return BlockRef(first, count, offset, len(block))


def encode_index(meta: dict, blocks: Iterable[BlockRef], data_length: int) -> bytes:
    rows = list(blocks)
    m = json.dumps(meta, sort_keys=True).encode()
    body = b"".join(
        [
            struct.pack(">I", len(m)),
            m,
            struct.pack(">I", len(rows)),
            *(_ROW.pack(b.first_entry_id, b.entry_count, b.offset, b.length) for b in rows),
            struct.pack(">Q", data_length),
        ]
    )
    return _head(INDEX_MAGIC, body)


def decode_index(raw: bytes) -> OffloadIndex:
    if len(raw) < _HEAD.size:
        raise CorruptObjectError("index object shorter than its header")
    magic, n, crc = _HEAD.unpack_from(raw)
    if magic != INDEX_MAGIC:
        raise CorruptObjectError(f"index object has bad magic {magic!r}")
    body = raw[_HEAD.size :]
    if len(body) != n:
        raise CorruptObjectError(f"index object length {len(body)}, header says {n}")
    if crc32c.crc32c(body) != crc:
        raise CorruptObjectError("index object checksum mismatch")
    try:
        (mlen,) = struct.unpack_from(">I", body, 0)
        meta = json.loads(body[4 : 4 + mlen])
        (nblocks,) = struct.unpack_from(">I", body, 4 + mlen)
        if nblocks > INDEX_BLOCKS_MAX:
            raise CorruptObjectError("index object lists too many blocks")
        pos = 8 + mlen
        blocks = tuple(BlockRef(*_ROW.unpack_from(body, pos + i * _ROW.size)) for i in range(nblocks))
        (data_length,) = struct.unpack_from(">Q", body, pos + nblocks * _ROW.size)
    except (struct.error, ValueError) as e:
        raise CorruptObjectError(f"index object malformed: {e}") from None
    return OffloadIndex(meta, blocks, data_length)
