"""Replication worker: copies under-replicated fragments to healthy bookies.

Theory of operation: a worker loops over the under-replication marks (woken
by notifications on ``UNDERREPLICATED_PATH`` or every
``replication_poll_interval_ms``).  For each marked ledger it tries the
ledger's lock (an ephemeral node, see :mod:`.underreplication`); the holder
repairs the ledger:

1. read the metadata; a deleted ledger just loses its mark;
2. for every fragment (first..last entry, ensemble) and every bookie of the
   ensemble that is no longer registered, pick a replacement with the
   placement policy (excluding the ensemble, lost and quarantined bookies, and
   those outside the ledger's bookie affinity groups, see :mod:`.isolation`),
   read each entry of the fragment that the lost bookie stored from a
   surviving replica (digest verified) and write it, exactly as framed, to
   the replacement (a recovery add, so a fenced ledger accepts it);
3. CAS the metadata: that fragment's ensemble now names the replacement.
   The CAS only applies if the fragment still has the ensemble we copied
   for, so a concurrent writer's ensemble change or another worker is never
   overwritten;
4. when no fragment names a lost bookie any more, delete the mark.

The last fragment of an OPEN ledger is still being written: it is left
alone, and once the mark is older than ``open_ledger_rereplication_grace_ms``
the worker recovers the ledger (fence + close, as BookKeeper does) so its
last fragment becomes fixed and repairable.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from magnetar.bookie.api import UNDERREPLICATED_PATH, BookieError
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookkeeper import api
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.isolation import isolation_exclusions
from magnetar.bookkeeper.metadata import fragment_ranges
from magnetar.bookkeeper.reader import EntryReader
from magnetar.bookkeeper.recovery import LedgerRecovery
from magnetar.bookkeeper.timeouts import with_timeout
from magnetar.bookkeeper.underreplication import UnderReplicationManager, lock_path
from magnetar.metadata.api import MetadataError, MetadataStore, Notification
from magnetar.metadata.coordination.lock import DistributedLock

log = logging.getLogger(__name__)


class FragmentCopyError(api.BKError):
    retriable = True


class ReplicationWorker:
    def __init__(self, ctx: ClientContext, store: MetadataStore, worker_id: str) -> None:
        self._ctx = ctx
        self._store = store
        self.worker_id = worker_id
        self._marks = UnderReplicationManager(store)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._first_seen: dict[int, float] = {}
        self.replicated_entries = 0  # statistics
        self.replicated_fragments = 0

    def start(self) -> None:
        self._store.add_listener(self._on_notification)
        self._task = self._ctx.supervisor.spawn(self._run(), name=f"replication-worker-{self.worker_id}")

    async def aclose(self) -> None:
        self._store.remove_listener(self._on_notification)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _on_notification(self, n: Notification) -> None:
        if n.path.startswith(UNDERREPLICATED_PATH):
            self._wakeup.set()

    async def _run(self) -> None:
        poll_s = self._ctx.config.replication_poll_interval_ms / 1000.0
        while True:
            self._wakeup.clear()
            try:
                await self.run_once()
            except (MetadataError, api.BKError) as exc:
                log.warning("replication worker %s: pass failed: %r", self.worker_id, exc)
            handle = self._ctx.clock.call_later(poll_s, self._wakeup.set)
            try:
                await self._wakeup.wait()
            finally:
                handle.cancel()

    async def run_once(self) -> list[int]:
        """One pass over the marks; returns the ledgers fully repaired (marks removed)."""
        done = []
        for ledger_id in await self._marks.marked():
            lock = DistributedLock(self._store, lock_path(ledger_id), self.worker_id.encode())
            if not await lock.try_acquire():
                await lock.release()
                continue
            try:
                if await self.replicate(ledger_id):
                    await self._marks.unmark(ledger_id)
                    self._first_seen.pop(ledger_id, None)
                    done.append(ledger_id)
            except (api.BKError, MetadataError, BookieError) as exc:
                log.info(
                    "replication worker %s: ledger %d not repaired yet: %r", self.worker_id, ledger_id, exc
                )
            finally:
                await lock.release()
        return done

    async def replicate(self, ledger_id: int) -> bool:
        """Repair what can be repaired now; True when no fragment names a lost bookie."""
        ctx = self._ctx
        try:
            md, version = await ctx.ledgers.read(ledger_id)
        except api.NoSuchLedgerError:
            return True
        registered = set(await ctx.registry.all_bookies())
        complete = True
        for first, last, ensemble in fragment_ranges(md):
            lost = [b for b in ensemble if b not in registered]
            if not lost:
                continue
            if last == -2:  # the open ledger's last fragment: still being written
                complete = False
                await self._maybe_recover_open(md)
                continue
            for bookie in lost:
                md, version = await self._replace_in_fragment(md, version, first, last, bookie, registered)
        return complete

    async def _maybe_recover_open(self, md: api.LedgerMetadata) -> None:
        now = self._ctx.clock.monotonic()
        seen = self._first_seen.setdefault(md.ledger_id, now)
        if now - seen < self._ctx.config.open_ledger_rereplication_grace_ms / 1000.0:
            return
        log.info("replication worker: fencing open ledger %d to repair its last fragment", md.ledger_id)
        await LedgerRecovery(self._ctx, md.ledger_id).run()

    async def _replace_in_fragment(
        self,
        md: api.LedgerMetadata,
        version: int,
        first: int,
        last: int,
        lost_bookie: str,
        registered: set[str],
    ) -> tuple[api.LedgerMetadata, int]:
        ctx = self._ctx
        ensemble = next(ens for f, ens in md.ensembles if f == first)
        index = ensemble.index(lost_bookie)
        writable = await ctx.registry.writable_bookies()
        racks = await ctx.registry.racks()
        exclude = {b for b in ensemble if b not in registered} | ctx.registry.quarantined()
        usable = [b for b in writable if b not in exclude]  # the ledger's bookie groups still hold
        exclude |= await isolation_exclusions(ctx.registry, md.custom_metadata, usable, md.ensemble_size)
        target = ctx.placement.replace_bookie(ensemble, index, md.write_quorum, writable, racks, exclude)
        copied = await self._copy_fragment(md, first, last, lost_bookie, target)
        new_ensemble = tuple(target if b == lost_bookie else b for b in ensemble)

        def mutate(m: api.LedgerMetadata) -> api.LedgerMetadata:
            fragments = list(m.ensembles)
            for i, (f, ens) in enumerate(fragments):
                if f == first:
                    if ens == new_ensemble:
                        return m  # our own earlier write, whose answer was lost
                    if ens != ensemble:
                        raise api.MetadataVersionError(
                            f"ledger {m.ledger_id}: fragment {first} changed meanwhile"
                        )
                    if i == len(fragments) - 1 and not m.is_closed:
                        raise api.MetadataVersionError(
                            f"ledger {m.ledger_id}: fragment {first} is open again"
                        )
                    fragments[i] = (f, new_ensemble)
                    return replace(m, ensembles=tuple(fragments))
            raise api.MetadataVersionError(f"ledger {m.ledger_id}: fragment {first} is gone")

        md, version = await with_timeout(
            ctx.clock,
            ctx.ledgers.update(md.ledger_id, mutate, known=(md, version)),
            ctx.config.metadata_timeout_ms,
            lambda: api.BKTimeoutError(f"ledger {md.ledger_id}: metadata update timed out"),
        )
        self.replicated_fragments += 1
        log.info(
            "replicated ledger %d fragment %d..%d: %s -> %s (%d entries)",
            md.ledger_id,
            first,
            last,
            lost_bookie,
            target,
            copied,
        )
        return md, version

    async def _copy_fragment(
        self, md: api.LedgerMetadata, first: int, last: int, lost: str, target: str
    ) -> int:
        """Copy the fragment's entries that ``lost`` stored to ``target``, a bounded batch at a time."""
        ids = [e for e in range(first, last + 1) if lost in md.write_set(e)]
        step = max(1, self._ctx.config.replication_copy_parallelism)
        reader = EntryReader(self._ctx, md.ledger_id, md.password)
        for start in range(0, len(ids), step):
            await asyncio.gather(
                *(self._copy_entry(md, reader, e, lost, target) for e in ids[start : start + step])
            )
        return len(ids)

    async def _copy_entry(
        self, md: api.LedgerMetadata, reader: EntryReader, entry_id: int, lost: str, target: str
    ) -> None:
        ctx = self._ctx
        sources = [b for b in md.write_set(entry_id) if b != lost]
        if not sources:
            raise FragmentCopyError(f"ledger {md.ledger_id} entry {entry_id}: no surviving replica")
        try:
            header, payload = await reader.read_entry(sources, entry_id)
        except api.BKError as exc:
            raise FragmentCopyError(f"ledger {md.ledger_id} entry {entry_id}: {exc}") from exc
        framed = encode_entry(md.ledger_id, entry_id, header.lac, header.length, payload)
        try:
            await with_timeout(
                ctx.clock,
                ctx.pool.get(target).add_entry(md.ledger_id, entry_id, md.password, framed, recovery=True),
                ctx.config.add_timeout_ms,
                lambda: FragmentCopyError(f"copy to {target} timed out"),
            )
        except BookieError as exc:
            ctx.registry.mark_failed(target)
            raise FragmentCopyError(f"copy of entry {entry_id} to {target} failed: {exc!r}") from exc
        self.replicated_entries += 1
