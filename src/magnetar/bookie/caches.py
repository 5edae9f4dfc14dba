"""Write cache and read cache of the ledger storage.

Theory of operation (DbLedgerStorage): a durable add lands in the *write
cache* (journal first, then here); a checkpoint swaps the active cache for an
empty one and flushes the old one, sorted by (ledger, entry), into an entry
log.  Until the flush is indexed, reads find the entry in either cache.  Both
caches count their bytes; the storage refuses to let the active one grow
past its limit (it triggers a flush and makes adds wait).

:class:`WriteCaches` is the pair the storage reads through: the active
cache and, while a checkpoint writes it out, the one being flushed.

The *read cache* keeps recently read entries, least recently used evicted
first, bounded by bytes.
"""

from __future__ import annotations

from collections import OrderedDict


class WriteCache:
    """Entries by ledger, then entry id.  Adds come mostly in entry order, so each ledger
    remembers whether its dict is still in order and a flush sorts only those that are not."""

    def __init__(self) -> None:
        self._ledgers: dict[int, dict[int, bytes]] = {}
        self._unordered: set[int] = set()  # ledgers whose entries were not put in id order
        self.size_bytes = 0

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        else:
            old = entries.get(entry_id)
            if old is not None:
                self.size_bytes -= len(old)
            elif entry_id < next(reversed(entries)):
                self._unordered.add(ledger_id)
        entries[entry_id] = data
        self.size_bytes += len(data)

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        entries = self._ledgers.get(ledger_id)
        return None if entries is None else entries.get(entry_id)

    def last_entry_id(self, ledger_id: int) -> int:
        entries = self._ledgers.get(ledger_id)
        return max(entries) if entries else -1

    def delete_ledger(self, ledger_id: int) -> None:
        entries = self._ledgers.pop(ledger_id, None)
        if entries:
            self.size_bytes -= sum(len(d) for d in entries.values())
        self._unordered.discard(ledger_id)

    def sorted_items(self) -> list[tuple[int, int, bytes]]:
        """Every entry, sorted.  Safe on another thread while the loop deletes ledgers
        (``delete_ledger`` drops a ledger's dict whole; nobody puts into a flushing cache)."""
        out: list[tuple[int, int, bytes]] = []
        for ledger_id in sorted(list(self._ledgers)):
            entries = self._ledgers.get(ledger_id)
            if entries is None:
                continue
            items = sorted(entries.items()) if ledger_id in self._unordered else entries.items()
            out.extend([(ledger_id, entry_id, data) for entry_id, data in items])
        return out

    def __len__(self) -> int:
        return sum(len(e) for e in self._ledgers.values())


class WriteCaches:
    """The active write cache and the one a checkpoint is flushing (None between flushes)."""

    def __init__(self) -> None:
        self.active = WriteCache()
        self.flushing: WriteCache | None = None

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        data = self.active.get(ledger_id, entry_id)
        if data is None and self.flushing is not None:
            data = self.flushing.get(ledger_id, entry_id)
        return data

    def swap(self) -> WriteCache:
        """Start a new active cache; the old one becomes the flushing one and is returned."""
        cache = self.flushing = self.active
        self.active = WriteCache()
        return cache

    def flushed(self) -> None:
        self.flushing = None

    def delete_ledger(self, ledger_id: int) -> None:
        self.active.delete_ledger(ledger_id)
        if self.flushing is not None:
            self.flushing.delete_ledger(ledger_id)


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
