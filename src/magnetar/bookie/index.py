"""The ledger index: (ledger, entry) -> location, per-ledger state, the checkpoint mark.

Theory of operation (DbLedgerStorage's RocksDB index): one ordered key/value
store holds everything the bookie must find again after a restart, under
fixed-width big-endian keys so related keys sort together:

    b"e" ledger u64 entry u64  ->  log id u64 | offset u64 | length u32     (entry location)
    b"l" ledger u64            ->  LedgerState (flags, LAC, last entry, master key)
    b"g" log id u64            ->  per-ledger byte counts of a finished entry log
    b"m"                       ->  the checkpoint mark (journal position)

A checkpoint writes the new locations, the dirty ledger states and the mark
in *one* synced batch, so the index and the mark never disagree.

:class:`IndexStore` is the narrow seam: ``get``, ordered ``scan`` of a key
range and atomic ``write`` of a batch.  :class:`RocksIndexStore` is the real
one (rocksdict, raw byte keys); :class:`MemoryIndexStore` keeps a dict and a
sorted key list -- a simulator keeps the object across simulated crashes,
every synced batch being "on disk".  All calls block; the storage runs them on
its executor.
"""

from __future__ import annotations

import bisect
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

_U64 = struct.Struct(">Q")
_ENTRY_KEY = struct.Struct(">cQQ")
_LOCATION = struct.Struct(">QQI")
_STATE = struct.Struct(">Bqq")
ENTRY_PREFIX = b"e"
LEDGER_PREFIX = b"l"
LOG_PREFIX = b"g"
MARK_KEY = b"m"

_FENCED = 1
_DELETED = 2


class Location(NamedTuple):
    """Where an entry's record is in the entry logs (a tuple: made once per checkpointed entry)."""

    log_id: int
    offset: int
    length: int

    def encode(self) -> bytes:
        return _LOCATION.pack(self.log_id, self.offset, self.length)

    @classmethod
    def decode(cls, data: bytes) -> Location:
        return cls(*_LOCATION.unpack(data))


@dataclass(slots=True)
class LedgerState:
    master_key: bytes = b""
    fenced: bool = False
    deleted: bool = False
    lac: int = -1
    last_entry_id: int = -1

    def encode(self) -> bytes:
        flags = (_FENCED if self.fenced else 0) | (_DELETED if self.deleted else 0)
        return _STATE.pack(flags, self.lac, self.last_entry_id) + self.master_key

    @classmethod
    def decode(cls, data: bytes) -> LedgerState:
        flags, lac, last = _STATE.unpack_from(data, 0)
        return cls(bytes(data[_STATE.size :]), bool(flags & _FENCED), bool(flags & _DELETED), lac, last)


ENTRY_KEY = _ENTRY_KEY  # b"e", ledger, entry: ENTRY_KEY.pack(ENTRY_PREFIX, ledger, entry)
LOCATION = _LOCATION  # LOCATION.pack(*location) == location.encode()


def entry_key(ledger_id: int, entry_id: int) -> bytes:
    return _ENTRY_KEY.pack(ENTRY_PREFIX, ledger_id, entry_id)


def parse_entry_key(key: bytes) -> tuple[int, int]:
    _, ledger_id, entry_id = _ENTRY_KEY.unpack(key)
    return ledger_id, entry_id


def ledger_entries_range(ledger_id: int) -> tuple[bytes, bytes]:
    return ENTRY_PREFIX + _U64.pack(ledger_id), ENTRY_PREFIX + _U64.pack(ledger_id + 1)


def ledger_key(ledger_id: int) -> bytes:
    return LEDGER_PREFIX + _U64.pack(ledger_id)


def log_key(log_id: int) -> bytes:
    return LOG_PREFIX + _U64.pack(log_id)


def encode_log_usage(usage: dict[int, int]) -> bytes:
    return b"".join(struct.pack(">QQ", k, v) for k, v in sorted(usage.items()))


def decode_log_usage(data: bytes) -> dict[int, int]:
    return {k: v for k, v in struct.iter_unpack(">QQ", data)}


@dataclass(slots=True)
class Batch:
    puts: dict[bytes, bytes] = field(default_factory=dict)
    deletes: list[bytes] = field(default_factory=list)
    delete_ranges: list[tuple[bytes, bytes]] = field(default_factory=list)

    def put(self, key: bytes, value: bytes) -> None:
        self.puts[key] = value

    def delete(self, key: bytes) -> None:
        self.puts.pop(key, None)
        self.deletes.append(key)

    def delete_range(self, start: bytes, end: bytes) -> None:
        self.delete_ranges.append((start, end))

    def __len__(self) -> int:
        return len(self.puts) + len(self.deletes) + len(self.delete_ranges)


@runtime_checkable
class IndexStore(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def scan(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Keys in [start, end) in order."""

    def write(self, batch: Batch, *, sync: bool = True) -> None:
        """Apply deletes/ranges, then puts, atomically."""

    def close(self) -> None: ...


class RocksIndexStore:
    def __init__(self, path: str) -> None:
        from rocksdict import Options, Rdict, WriteOptions

        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_keep_log_file_num(2)
        self._db = Rdict(path, opts)
        self._sync = WriteOptions()
        self._sync.sync = True
        self._nosync = WriteOptions()
        self._closed = False

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def scan(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        it.seek(start)
        while it.valid():
            k = it.key()
            if k >= end:
                break
            yield k, it.value()
            it.next()

    def write(self, batch: Batch, *, sync: bool = True) -> None:
        from rocksdict import WriteBatch

        wb = WriteBatch(raw_mode=True)
        for start, end in batch.delete_ranges:
            wb.delete_range(start, end)
        for k in batch.deletes:
            wb.delete(k)
        for i, (k, v) in enumerate(batch.puts.items()):
            wb.put(k, v)
            if i & 1023 == 1023:
                time.sleep(0.00005)  # let the event loop thread have the GIL (see entry_log.yield_gil)
        self._db.write(wb, self._sync if sync else self._nosync)

    def compact(self) -> None:
        self._db.compact_range(None, None)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._db.close()


class MemoryIndexStore:
    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def scan(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        i = bisect.bisect_left(self._keys, start)
        keys = self._keys[i : bisect.bisect_left(self._keys, end)]
        for k in keys:
            v = self._data.get(k)
            if v is not None:
                yield k, v

    def write(self, batch: Batch, *, sync: bool = True) -> None:
        for start, end in batch.delete_ranges:
            i, j = bisect.bisect_left(self._keys, start), bisect.bisect_left(self._keys, end)
            for k in self._keys[i:j]:
                del self._data[k]
            del self._keys[i:j]
        for k in batch.deletes:
            if self._data.pop(k, None) is not None:
                self._keys.pop(bisect.bisect_left(self._keys, k))
        for k, v in batch.puts.items():
            if k not in self._data:
                bisect.insort(self._keys, k)
            self._data[k] = v

    def close(self) -> None:
        pass
