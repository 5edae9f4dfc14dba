"""MurmurHash3 x86 32-bit, as Pulsar hashes sticky keys.

Theory of operation
-------------------
Key_Shared routes a message by its *sticky key* (ordering key, else the
partition key -- base64-decoded when flagged -- else ``b"NONE_KEY"``, always
from the entry's outer MessageMetadata).  The broker hashes the key with
MurmurHash3 x86 32-bit, seed 0, 4-byte little-endian blocks (Guava's
``murmur3_32_fixed``), masks the sign bit (``& 0x7FFFFFFF``) and takes the
slot ``hash % 65536``.  Pulsar 4.x never uses slot 0, which means "not set":
a key that lands on 0 goes to slot 1 (``avoid_zero_slot=True``, our default;
pass False for the 3.x rule).  The same masked hash places consumers on the
consistent-hash ring (``consumerName + "\\0" + i``) and picks Failover's
active consumer, so every caller uses :func:`pulsar_hash` on UTF-8 bytes.

Pure Python: blocks are read in one ``struct.unpack``, so a short key costs a
few microseconds; nothing here is on a per-message path longer than a key.
"""

from __future__ import annotations

import struct

__all__ = ["KEY_SHARED_RANGE_SIZE", "NONE_KEY", "murmur3_32", "pulsar_hash", "sticky_key_slot"]

KEY_SHARED_RANGE_SIZE = 65536  # Java DEFAULT_RANGE_SIZE = 2 << 15; slots are 0..65535
NONE_KEY = b"NONE_KEY"  # the sticky key of a message without ordering or partition key

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF


def murmur3_32(data: bytes | bytearray | memoryview | str, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data`` (str is UTF-8 encoded) as an unsigned 32-bit int."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    buf = bytes(data)
    n = len(buf)
    nblocks = n >> 2
    h = seed & _M32
    for k in struct.unpack_from(f"<{nblocks}I", buf):
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        h ^= (k * _C2) & _M32
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = n & 3
    if tail:
        k = 0
        base = nblocks << 2
        if tail == 3:
            k ^= buf[base + 2] << 16
        if tail >= 2:
            k ^= buf[base + 1] << 8
        k ^= buf[base]
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        h ^= (k * _C2) & _M32
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def pulsar_hash(data: bytes | bytearray | memoryview | str) -> int:
    """Pulsar's ``Murmur3_32Hash.makeHash``: seed 0, sign bit masked (0 .. 2**31-1)."""
    return murmur3_32(data, 0) & 0x7FFFFFFF


def sticky_key_slot(sticky_key: bytes | str, *, avoid_zero_slot: bool = True) -> int:
    """The Key_Shared slot in ``[0, 65535]`` of a sticky key (never 0 when ``avoid_zero_slot``)."""
    slot = pulsar_hash(sticky_key) % KEY_SHARED_RANGE_SIZE
    if slot == 0 and avoid_zero_slot:
        return 1
    return slot
