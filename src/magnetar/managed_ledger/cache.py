"""The shared entry cache: tailing reads served from memory.

Theory of operation: one :class:`EntryCache` per factory, shared by every
managed ledger it opened, bounded by ``max_bytes``.  Every confirmed add is
inserted (the writer already holds the bytes), and entries read from bookies
(including read-ahead) are inserted too, so consumers that keep up with the
producers never touch a bookie.

An entry added with per-entry metadata (``EntryMetadata``: message count, key
hash, deliver-at) keeps it beside the data in a side table (only entries that
have one pay for it), evicted and invalidated with the entry; ``get_run_meta``
returns it for the run ``get_run`` returns.

Entries are keyed by (ledger id, entry id); ledger ids are unique in a
BookKeeper cluster, so entries of different managed ledgers never collide.
Eviction is insertion order (FIFO): the oldest inserted entries go first,
which for a log is the same as "furthest behind the tail".  A per-ledger dict
gives O(1) lookups and lets a deleted ledger be dropped at once; the FIFO queue
may then hold stale keys, which eviction skips (the queue is compacted when
stale keys dominate so it stays bounded too).
"""

from __future__ import annotations

from collections import deque
from typing import Any


class EntryCache:
    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self._ledgers: dict[int, dict[int, bytes]] = {}
        self._meta: dict[int, dict[int, Any]] = {}  # ledger -> entry -> EntryMetadata
        self._fifo: deque[tuple[int, int]] = deque()
        self._size_bytes = 0
        self._count = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    def __len__(self) -> int:
        return self._count

    def put(self, ledger_id: int, entry_id: int, data: bytes, metadata: Any = None) -> None:
        n = len(data)
        if n > self.max_bytes:
            return
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        elif entry_id in entries:
            return
        entries[entry_id] = data
        if metadata is not None:
            metas = self._meta.get(ledger_id)
            if metas is None:
                metas = self._meta[ledger_id] = {}
            metas[entry_id] = metadata
        self._fifo.append((ledger_id, entry_id))
        self._size_bytes += n
        self._count += 1
        if self._size_bytes > self.max_bytes:
            self._evict()

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        entries = self._ledgers.get(ledger_id)
        data = entries.get(entry_id) if entries is not None else None
        if data is None:
            self.misses += 1
        else:
            self.hits += 1
        return data

    def get_run(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Cached entries first, first+1, ... up to ``last``, stopping at the first miss."""
        entries = self._ledgers.get(ledger_id)
        out: list[bytes] = []
        if entries is not None:
            for eid in range(first, last + 1):
                data = entries.get(eid)
                if data is None:
                    break
                out.append(data)
        self.hits += len(out)
        if len(out) < last - first + 1:
            self.misses += 1
        return out

    def get_run_meta(self, ledger_id: int, first: int, count: int) -> list[Any] | None:
        """The metadata of ``count`` cached entries from ``first`` (None each where an entry
        has none); None when none of this ledger's cached entries has any."""
        metas = self._meta.get(ledger_id)
        if not metas:
            return None
        return [metas.get(eid) for eid in range(first, first + count)]

    def invalidate_ledger(self, ledger_id: int) -> None:
        self._meta.pop(ledger_id, None)
        entries = self._ledgers.pop(ledger_id, None)
        if entries:
            self._size_bytes -= sum(len(d) for d in entries.values())
            self._count -= len(entries)
            if len(self._fifo) > 2 * self._count + 1024:
                self._fifo = deque(
                    k for k in self._fifo if k[0] in self._ledgers and k[1] in self._ledgers[k[0]]
                )

    def clear(self) -> None:
        self._ledgers.clear()
        self._meta.clear()
        self._fifo.clear()
        self._size_bytes = 0
        self._count = 0

    def _evict(self) -> None:
        target = int(self.max_bytes * 0.9)
        fifo, ledgers = self._fifo, self._ledgers
        while self._size_bytes > target and fifo:
            lid, eid = fifo.popleft()
            entries = ledgers.get(lid)
            if entries is None:
                continue
            data = entries.pop(eid, None)
            if data is None:
                continue
            metas = self._meta.get(lid)
            if metas is not None and metas.pop(eid, None) is not None and not metas:
                del self._meta[lid]
            if not entries:
                del ledgers[lid]
            self._size_bytes -= len(data)
            self._count -= 1
            self.evictions += 1

    def stats(self) -> dict[str, int]:
        return {
            "cacheSize": self._size_bytes,
            "cacheEntries": self._count,
            "cacheHits": self.hits,
            "cacheMisses": self.misses,
            "cacheEvictions": self.evictions,
        }
