"""Checkpoints of the ledger storage: write cache -> entry log + index, then journal GC.

Theory of operation (DbLedgerStorage's checkpoint).  A checkpoint runs every
``flushInterval``, when the write cache fills to half its limit, after a
journal replay and on close; one at a time (a lock).

* In one synchronous step (no await) it reads the journal's
  ``synced_position`` (the *mark*) and swaps the active write cache for an
  empty one.  The journal runs every record's ``on_durable`` callback (which
  puts the entry in the active write cache) *before* its position moves past
  the record, so every record at or before the mark is in the swapped-out
  cache or in an older, already flushed one.
* The swapped cache is written, sorted by (ledger, entry) -- sorted on the
  storage thread: the loop only deletes whole ledgers from it meanwhile --, to
  the active entry log (one fsync); then the entry locations, the dirty ledger states,
  per-log usage and the mark go into the index in one synced batch.  Only
  then do journal files wholly before the mark get deleted.
* Adds wait (bounded, ``dbStorage_maxThrottleTimeMs``) while the active
  cache is full; every flush wakes them to check again.
* A failed flush puts the entries back in the active cache (unless a newer
  copy or a deletion came meanwhile) and the ledger states back in the dirty
  set; ENOSPC turns the bookie read-only.  The journal still holds them all.
* After a restart the write cache also holds what the replay read, up to
  the replay position (the journal's own position starts over in a new
  file), so the mark is the later of the two.
* Deleted-ledger markers are pruned once the mark covers every journal
  record enqueued before their deletion (ledger_table.py).

:class:`Checkpointer` keeps no state besides its lock; the caches, journal,
index and ledger table belong to :class:`~magnetar.bookie.storage.LedgerStorage`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import TYPE_CHECKING

from magnetar.bookie.api import TooManyRequestsError
from magnetar.bookie.caches import WriteCache
from magnetar.bookie.entry_log import GIL_YIELD_MASK, yield_gil
from magnetar.bookie.index import (
    ENTRY_KEY,
    ENTRY_PREFIX,
    LOCATION,
    MARK_KEY,
    Batch,
    encode_log_usage,
    ledger_key,
    log_key,
)
from magnetar.bookie.journal_format import JournalPosition

if TYPE_CHECKING:
    from magnetar.bookie.storage import LedgerStorage

log = logging.getLogger(__name__)

_CACHE_ROOM_TIMEOUT_S = 10.0  # BK dbStorage_maxThrottleTimeMs


class Checkpointer:
    def __init__(self, storage: LedgerStorage) -> None:
        self._s = storage
        self.lock = asyncio.Lock()
        self.cache_room = asyncio.Event()  # set after every flush: adds waiting for room re-check
        self.cache_room.set()

    def trigger(self) -> None:
        """Start a checkpoint in the background unless one is running."""
        s = self._s
        if not self.lock.locked() and not s.supervisor.closed:
            s.supervisor.spawn(s.checkpoint(), name="checkpoint-now")

    async def wait_for_cache_room(self, max_bytes: int) -> None:
        """Wait (bounded) until the active write cache is below ``max_bytes``, checkpointing."""
        s = self._s
        if s.write_caches.active.size_bytes < max_bytes:
            return
        self.trigger()
        deadline = s.clock.monotonic() + _CACHE_ROOM_TIMEOUT_S
        while s.write_caches.active.size_bytes >= max_bytes:
            remaining = deadline - s.clock.monotonic()
            if remaining <= 0:
                raise TooManyRequestsError("write cache full and flush is not keeping up", s.bookie_id)
            self.cache_room.clear()
            self.trigger()
            try:
                await asyncio.wait_for(self.cache_room.wait(), remaining)
            except TimeoutError:
                pass

    async def run_periodically(self) -> None:
        s = self._s
        while True:
            await s.clock.sleep(s.config.flush_interval_ms / 1000.0)
            try:
                await s.checkpoint()
            except Exception:
                log.exception("bookie %s checkpoint failed; will retry", s.bookie_id)

    async def checkpoint_now(self, replay_mark: JournalPosition | None = None) -> JournalPosition:
        s = self._s
        async with self.lock:
            # --- one synchronous step: the mark and the cache swap agree ---
            mark = replay_mark if replay_mark is not None else max(s.journal.synced_position, s._replayed_to)
            synced_count = s.journal.synced_count
            if mark < s.mark:
                mark = s.mark
            cache = s.write_caches.swap()
            dirty = s.table.take_dirty()
            # --------------------------------------------------------------
            try:  # the swapped cache is sorted on the storage thread, not the loop
                await s.storage_executor.run(self._flush_sync, cache, dirty, mark)
            except BaseException as exc:
                self._restore_after_failed_flush(cache, dirty)
                if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                    s.set_read_only(True, f"ledger disk full during checkpoint: {exc}")
                raise
            finally:
                s.write_caches.flushed()
                self.cache_room.set()
            s.mark = mark
            if replay_mark is None:
                await self._prune_deleted(synced_count)
        await s.journal.delete_files_before(mark)
        return mark

    def _restore_after_failed_flush(self, cache: WriteCache, dirty: dict[int, bytes]) -> None:
        s = self._s
        active = s.write_caches.active
        for ledger_id, entry_id, data in cache.sorted_items():
            if s.table.exists(ledger_id) and active.get(ledger_id, entry_id) is None:
                active.put(ledger_id, entry_id, data)
        s.table.restore_dirty(dirty)

    def _flush_sync(self, cache: WriteCache, dirty: dict[int, bytes], mark: JournalPosition) -> None:
        s = self._s
        assert s.index is not None
        batch = Batch()
        items = cache.sorted_items()
        if items:
            locations, usage = s.entry_logger.append_batch(items)
            puts, key, loc_pack = batch.puts, ENTRY_KEY.pack, LOCATION.pack  # per entry: inline
            for i, ((ledger_id, entry_id, _), loc) in enumerate(zip(items, locations, strict=True)):
                puts[key(ENTRY_PREFIX, ledger_id, entry_id)] = loc_pack(*loc)
                if i & GIL_YIELD_MASK == GIL_YIELD_MASK:
                    yield_gil()
            for log_id, per_ledger in usage.items():
                batch.put(log_key(log_id), encode_log_usage(per_ledger))
        for ledger_id, raw in dirty.items():
            batch.put(ledger_key(ledger_id), raw)
        batch.put(MARK_KEY, mark.encode())
        s.index.write(batch, sync=True)

    async def _prune_deleted(self, synced_count: int) -> None:
        """Drop deleted-ledger markers once the checkpoint mark is past every journal record
        enqueued before the deletion: a replay can no longer bring those ledgers back."""
        s = self._s
        done = s.table.prunable(synced_count)
        if not done:
            return
        batch = Batch()
        for lid in done:
            batch.delete(ledger_key(lid))
        assert s.index is not None
        await s.storage_executor.run(s.index.write, batch)
        s.table.forget(done)
