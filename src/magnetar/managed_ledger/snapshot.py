"""The cursor snapshot: mark-delete + acked ranges + batch ack sets, in a compact binary form.

Theory of operation: a durable cursor's whole state is written as one entry of
its cursor ledger each time it is persisted.  With millions of ack holes that
entry must stay small, so it is a varint stream with delta coding:

    magic "MCS1"
    zigzag(md.ledger) zigzag(md.entry)
    n_props, then (len, utf-8 name, zigzag value) each
    n_ranges, then for each closed acked range [first, last] (one ledger each):
        zigzag(ledger - previous ledger)
        start: (first - previous last) in the same ledger, else zigzag(first)
        last - first
    n_ack_sets, then for each partly acked batch entry:
        zigzag(ledger - previous ledger), entry (delta in the same ledger, else zigzag)
        n_words, each word as an unsigned varint (bit i set = message i pending)
    crc32 of everything above (4 bytes, big-endian)

An alternating pattern (ack, skip, ack, ...) costs 3 bytes a range, so the
10,000 ranges Pulsar persists by default fit in ~30 KB.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

MAGIC = b"MCS1"

PosTuple = tuple[int, int]


class SnapshotError(ValueError):
    pass


@dataclass
class CursorSnapshot:
    mark_delete: PosTuple
    ranges: list[tuple[PosTuple, PosTuple]] = field(default_factory=list)
    ack_sets: list[tuple[PosTuple, list[int]]] = field(default_factory=list)
    properties: dict[str, int] = field(default_factory=dict)


def _zz(v: int) -> int:
    return v << 1 if v >= 0 else ((-v) << 1) - 1


def _unzz(v: int) -> int:
    return v >> 1 if not v & 1 else -((v + 1) >> 1)


def _put(out: bytearray, v: int) -> None:
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode(snap: CursorSnapshot) -> bytes:
    out = bytearray(MAGIC)
    put = _put
    put(out, _zz(snap.mark_delete[0]))
    put(out, _zz(snap.mark_delete[1]))
    put(out, len(snap.properties))
    for k, v in snap.properties.items():
        kb = k.encode()
        put(out, len(kb))
        out += kb
        put(out, _zz(int(v)))
    put(out, len(snap.ranges))
    prev_l, prev_e = snap.mark_delete[0], -1
    append = out.append
    for (lid, first), (_, last) in snap.ranges:
        # The hot loop (up to max_unacked_ranges_to_persist ranges per snapshot): one-byte
        # varints, the common case, are appended inline.
        if lid == prev_l:
            append(0)
            gap = first - prev_e
            if 0 < gap < 0x80:
                append(gap)
            else:
                put(out, gap)
        else:
            put(out, _zz(lid - prev_l))
            put(out, _zz(first))
        span = last - first
        if 0 <= span < 0x80:
            append(span)
        else:
            put(out, span)
        prev_l, prev_e = lid, last
    put(out, len(snap.ack_sets))
    prev_l, prev_e = snap.mark_delete[0], -1
    for (lid, eid), words in snap.ack_sets:
        put(out, _zz(lid - prev_l))
        put(out, eid - prev_e if lid == prev_l else _zz(eid))
        put(out, len(words))
        for w in words:
            put(out, w & 0xFFFFFFFFFFFFFFFF)
        prev_l, prev_e = lid, eid
    out += zlib.crc32(out).to_bytes(4, "big")
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "i")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.i = 0

    def uv(self) -> int:
        buf, i = self.buf, self.i
        shift = result = 0
        while True:
            if i >= len(buf):
                raise SnapshotError("truncated cursor snapshot")
            b = buf[i]
            i += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 70:
                raise SnapshotError("varint too long")
        self.i = i
        return result

    def raw(self, n: int) -> bytes:
        if self.i + n > len(self.buf):
            raise SnapshotError("truncated cursor snapshot")
        b = self.buf[self.i : self.i + n]
        self.i += n
        return b


def decode(data: bytes) -> CursorSnapshot:
    if len(data) < 8 or data[:4] != MAGIC:
        raise SnapshotError("not a cursor snapshot")
    body, crc = data[:-4], int.from_bytes(data[-4:], "big")
    if zlib.crc32(body) != crc:
        raise SnapshotError("cursor snapshot checksum mismatch")
    r = _Reader(body)
    r.i = 4
    md = (_unzz(r.uv()), _unzz(r.uv()))
    props: dict[str, int] = {}
    for _ in range(r.uv()):
        k = r.raw(r.uv()).decode()
        props[k] = _unzz(r.uv())
    ranges: list[tuple[PosTuple, PosTuple]] = []
    prev_l, prev_e = md[0], -1
    for _ in range(r.uv()):
        lid = prev_l + _unzz(r.uv())
        first = prev_e + r.uv() if lid == prev_l else _unzz(r.uv())
        last = first + r.uv()
        ranges.append(((lid, first), (lid, last)))
        prev_l, prev_e = lid, last
    ack_sets: list[tuple[PosTuple, list[int]]] = []
    prev_l, prev_e = md[0], -1
    for _ in range(r.uv()):
        lid = prev_l + _unzz(r.uv())
        eid = prev_e + r.uv() if lid == prev_l else _unzz(r.uv())
        words = [r.uv() for _ in range(r.uv())]
        ack_sets.append(((lid, eid), words))
        prev_l, prev_e = lid, eid
    if r.i != len(body):
        raise SnapshotError("trailing bytes in cursor snapshot")
    return CursorSnapshot(md, ranges, ack_sets, props)
