"""The ledger storage's read path: caches first, then the index and an entry log.

Theory of operation (DbLedgerStorage's read side).  An entry is looked up in
the active write cache, the write cache being flushed by a checkpoint, the
read cache, and only then in the index (its location) and the entry log (its
bytes), on the read executor.  ``LAST_ENTRY`` means the highest entry id
stored for the ledger.

* Read-ahead: a cache miss reads up to 256 KiB of the entry log from the
  entry's location; the entries after it go to the read cache, but only
  those the index confirms live where they were read (compaction may have
  moved a newer copy elsewhere) and that no write cache holds a newer copy
  of.  ``readAheadBatchSize`` <= 1 turns this off.
* ``read_entries(first, last)`` is a batch read: the run the caches hold is
  answered at once, a miss goes to the entry log once and its read-ahead
  fills the cache for the entries after it.  It stops early at ``max_bytes``
  or at the first entry this bookie lacks.
* Compaction may move an entry between the index lookup and the read (the
  old log is gone: FileNotFoundError); the read is retried once.

:class:`StorageReads` holds no state of its own: the caches, index, entry
logs and ledger table are the storage's (:class:`~magnetar.bookie.storage.LedgerStorage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from magnetar.bookie.api import (
    LAST_ENTRY,
    BadRequestError,
    BookieError,
    BookieUnavailableError,
    NoSuchEntryError,
)
from magnetar.bookie.entry_log import EntryLogCorruption
from magnetar.bookie.index import Location, entry_key

if TYPE_CHECKING:
    from magnetar.bookie.storage import LedgerStorage

_READ_AHEAD_BYTES = 256 * 1024  # one read on a cache miss; following entries go to the read cache


class StorageReads:
    def __init__(self, storage: LedgerStorage) -> None:
        self._s = storage

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        s = self._s
        if fence:
            await s.fence(ledger_id, master_key)
        if s.closed:
            raise BookieUnavailableError("bookie storage is closed", s.bookie_id)
        st = s.table.existing(ledger_id)
        if entry_id == LAST_ENTRY:
            entry_id = st.last_entry_id
            if entry_id < 0:
                raise NoSuchEntryError(f"ledger {ledger_id} has no entries here", s.bookie_id)
        elif entry_id < 0:
            raise BadRequestError(f"bad entry id {entry_id}", s.bookie_id)
        data = self.cached(ledger_id, entry_id)
        if data is not None:
            return data
        run = None
        for _attempt in range(2):  # compaction may move the entry between lookup and read
            try:
                run = await s.read_executor.run(self._read_sync, ledger_id, entry_id)
            except FileNotFoundError:
                continue
            except EntryLogCorruption as exc:
                raise BookieError(f"stored entry is corrupt: {exc}", s.bookie_id) from None
            break
        if run:
            data = run[0][1]
            write_caches = s.write_caches
            for eid, ahead in run[1:]:
                if write_caches.get(ledger_id, eid) is None:  # no newer copy waiting for a flush
                    s._read_cache.put(ledger_id, eid, ahead)
        if data is None:
            data = self.cached(ledger_id, entry_id)  # flushed or compacted while we looked
        if data is None:
            raise NoSuchEntryError(f"entry {ledger_id}:{entry_id} not found", s.bookie_id)
        s._read_cache.put(ledger_id, entry_id, data)
        return data

    async def read_entries(self, ledger_id: int, first: int, last: int, max_bytes: int = 0) -> list[bytes]:
        """Entries ``first..last`` in order (a batch read); stops early at ``max_bytes``
        (0: no limit, at least one entry is returned) or at the first entry this bookie does
        not have (NoSuchEntryError only if it lacks ``first``)."""
        if first < 0 or last < first:
            raise BadRequestError(f"bad entry range {first}..{last}", self._s.bookie_id)
        out: list[bytes] = []
        nbytes = 0
        for entry_id in range(first, last + 1):
            data = self.cached(ledger_id, entry_id)
            if data is None:
                try:
                    data = await self.read_entry(ledger_id, entry_id)
                except NoSuchEntryError:
                    if not out:
                        raise
                    break
            out.append(data)
            nbytes += len(data)
            if max_bytes and nbytes >= max_bytes:
                break
        return out

    def cached(self, ledger_id: int, entry_id: int) -> bytes | None:
        data = self._s.write_caches.get(ledger_id, entry_id)
        if data is None:
            data = self._s._read_cache.get(ledger_id, entry_id)
        return data

    def _read_sync(self, ledger_id: int, entry_id: int) -> list[tuple[int, bytes]] | None:
        """The entry, then read-ahead entries that the index confirms live where they were read."""
        s = self._s
        index = s.index
        assert index is not None
        raw = index.get(entry_key(ledger_id, entry_id))
        if raw is None:
            return None
        loc = Location.decode(raw)
        if s.config.read_ahead_batch_size <= 1:
            return [(entry_id, s.entry_logger.read(loc, ledger_id, entry_id))]
        run = s.entry_logger.read_run(
            loc, ledger_id, entry_id, _READ_AHEAD_BYTES, s.config.read_ahead_batch_size
        )
        out = [(entry_id, run[0].data)]
        for rec in run[1:]:
            if index.get(entry_key(ledger_id, rec.entry_id)) != rec.location.encode():
                break  # a newer copy lives elsewhere: stop rather than cache a stale one
            out.append((rec.entry_id, rec.data))
        return out
