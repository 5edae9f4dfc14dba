"""Write cache and read cache of the ledger storage.

Theory of operation (DbLedgerStorage): a durable add lands in the *write
cache* (journal first, then here); a checkpoint swaps the active cache for an
empty one and flushes the old one, sorted by (ledger, entry), into an entry
log.  Until the flush is indexed, reads find the entry in either cache.  Both
caches count their bytes; the storage refuses to let the active one grow
past its limit (it triggers a flush and makes adds wait).

The *read cache* keeps recently read entries, least recently used evicted
first, bounded by bytes.
"""

from __future__ import annotations

from collections import OrderedDict


class WriteCache:
    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], bytes] = {}
        self._last_by_ledger: dict[int, int] = {}
        self.size_bytes = 0

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        key = (ledger_id, entry_id)
        old = self._entries.get(key)
        if old is not None:
            self.size_bytes -= len(old)
        self._entries[key] = data
        self.size_bytes += len(data)
        if entry_id > self._last_by_ledger.get(ledger_id, -1):
            self._last_by_ledger[ledger_id] = entry_id

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        return self._entries.get((ledger_id, entry_id))

    def last_entry_id(self, ledger_id: int) -> int:
        return self._last_by_ledger.get(ledger_id, -1)

    def delete_ledger(self, ledger_id: int) -> None:
        for key in [k for k in self._entries if k[0] == ledger_id]:
            self.size_bytes -= len(self._entries.pop(key))
        self._last_by_ledger.pop(ledger_id, None)

    def sorted_items(self) -> list[tuple[int, int, bytes]]:
        return [(k[0], k[1], v) for k, v in sorted(self._entries.items())]

    def __len__(self) -> int:
        return len(self._entries)


class ReadCache:
    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        key = (ledger_id, entry_id)
        data = self._entries.get(key)
        if data is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return data

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        if len(data) > self._max_bytes:
            return
        key = (ledger_id, entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size_bytes -= len(old)
        self._entries[key] = data
        self.size_bytes += len(data)
        while self.size_bytes > self._max_bytes and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self.size_bytes -= len(dropped)

    def invalidate(self, ledger_id: int, entry_id: int) -> None:
        old = self._entries.pop((ledger_id, entry_id), None)
        if old is not None:
            self.size_bytes -= len(old)

    def delete_ledger(self, ledger_id: int) -> None:
        for key in [k for k in self._entries if k[0] == ledger_id]:
            self.size_bytes -= len(self._entries.pop(key))
