"""Garbage collection and compaction of a bookie's storage.

Theory of operation (BookKeeper's GarbageCollectorThread):

1. **Ledger GC.**  Snapshot the ledgers this bookie stores, *then* list the
   ledger nodes in the metadata store.  Ledger ids only grow and a client
   creates the metadata before writing to any bookie, so a ledger in the
   snapshot but not in the listing was deleted -- a ledger created after the
   snapshot is simply not considered this round.  Each candidate is checked
   once more with ``exists`` and then forgotten by the storage (index entries
   and caches dropped; the space is still in the entry logs).
2. **Compaction.**  For each finished entry log (not the active one) the
   live fraction is (bytes of ledgers still present) / (file size), from the
   per-log usage persisted with the index.  Logs under the threshold are
   compacted on the storage thread: records whose index entry still points
   at them are appended to the active log, the index is switched to the new
   locations in one synced batch, and only then is the old file deleted.
   A read racing with this finds the old file gone and looks the entry up
   again.  Minor compaction (``minorCompactionThreshold``, every
   ``minorCompactionInterval``) and major (``majorCompactionThreshold``,
   every ``majorCompactionInterval``) differ only in threshold and period.

``run_once`` does one round; ``run`` repeats it every ``gcWaitTime``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from magnetar.bookie.api import LEDGERS_ROOT, ledger_id_from_node, ledger_path
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.index import Batch, Location, decode_log_usage, encode_log_usage, entry_key, log_key
from magnetar.bookie.storage import LedgerStorage
from magnetar.metadata.api import MetadataStore
from magnetar.runtime import Clock

log = logging.getLogger(__name__)


@dataclass(slots=True)
class GcResult:
    ledgers_deleted: list[int] = field(default_factory=list)
    logs_compacted: list[int] = field(default_factory=list)
    entries_moved: int = 0
    bytes_reclaimed: int = 0


class GarbageCollector:
    def __init__(
        self, storage: LedgerStorage, store: MetadataStore, config: BookieConfig, clock: Clock
    ) -> None:
        self._storage = storage
        self._store = store
        self._config = config
        self._clock = clock
        now = clock.monotonic()
        self._last_minor = now
        self._last_major = now

    async def gc_ledgers(self) -> list[int]:
        candidates = self._storage.ledger_ids()
        live: set[int] = set()
        for name in await self._store.children(LEDGERS_ROOT):
            lid = ledger_id_from_node(name)
            if lid is not None:
                live.add(lid)
        deleted = []
        for lid in candidates:
            if lid in live:
                continue
            if await self._store.exists(ledger_path(lid)) is not None:
                continue
            if await self._storage.delete_ledger(lid):
                deleted.append(lid)
        if deleted:
            log.info("bookie %s: garbage-collected %d ledgers", self._storage.bookie_id, len(deleted))
        return deleted

    async def live_fractions(self) -> dict[int, float]:
        """Live fraction of every finished entry log."""
        return await self._storage.storage_executor.run(self._live_fractions_sync)

    def _live_fractions_sync(self) -> dict[int, float]:
        index = self._storage.index
        assert index is not None
        logger = self._storage.entry_logger
        out: dict[int, float] = {}
        for log_id in logger.log_ids():
            if logger.is_active(log_id):
                continue
            raw = index.get(log_key(log_id))
            usage = decode_log_usage(raw) if raw is not None else {}
            live = sum(b for lid, b in usage.items() if self._storage.ledger_exists(lid))
            size = logger.log_size(log_id)
            out[log_id] = live / size if size > 0 else 0.0
        return out

    async def compact(self, threshold: float) -> GcResult:
        result = GcResult()
        for log_id, fraction in sorted((await self.live_fractions()).items()):
            if fraction >= threshold:
                continue
            moved, reclaimed = await self._storage.storage_executor.run(self._compact_log_sync, log_id)
            result.logs_compacted.append(log_id)
            result.entries_moved += moved
            result.bytes_reclaimed += reclaimed
            log.info(
                "bookie %s: compacted entry log %d (live %.1f%%, %d entries moved, %d bytes freed)",
                self._storage.bookie_id,
                log_id,
                fraction * 100,
                moved,
                reclaimed,
            )
        return result

    def _compact_log_sync(self, log_id: int) -> tuple[int, int]:
        """On the storage thread (serialised with checkpoint flushes and deletions)."""
        index = self._storage.index
        assert index is not None
        logger = self._storage.entry_logger
        size = logger.log_size(log_id)
        live = []
        for rec in logger.scan(log_id):
            if not self._storage.ledger_exists(rec.ledger_id):
                continue
            if index.get(entry_key(rec.ledger_id, rec.entry_id)) == rec.location.encode():
                live.append(rec)
        batch = Batch()
        if live:
            locations, usage = logger.append_batch([(r.ledger_id, r.entry_id, r.data) for r in live])
            for rec, loc in zip(live, locations, strict=True):
                batch.put(entry_key(rec.ledger_id, rec.entry_id), Location.encode(loc))
            for lid, per_ledger in usage.items():
                batch.put(log_key(lid), encode_log_usage(per_ledger))
        batch.delete(log_key(log_id))
        index.write(batch, sync=True)
        logger.delete(log_id)
        return len(live), size

    async def run_once(self, *, force_major: bool = False, force_minor: bool = False) -> GcResult:
        deleted = await self.gc_ledgers()
        now = self._clock.monotonic()
        threshold = 0.0
        if force_major or now - self._last_major >= self._config.major_compaction_interval_s:
            threshold = self._config.major_compaction_threshold
            self._last_major = self._last_minor = now
        elif force_minor or now - self._last_minor >= self._config.minor_compaction_interval_s:
            threshold = self._config.minor_compaction_threshold
            self._last_minor = now
        result = await self.compact(threshold) if threshold > 0 else GcResult()
        result.ledgers_deleted = deleted
        return result

    async def run(self) -> None:
        while True:
            await self._clock.sleep(self._config.gc_wait_time_ms / 1000.0)
            try:
                await self.run_once()
            except Exception:
                log.exception("bookie %s: garbage collection round failed", self._storage.bookie_id)
