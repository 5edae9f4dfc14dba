"""Ledger recovery: fence, find the last entry, re-replicate the tail, close.

Theory of operation (BookKeeper's LedgerRecoveryOp, same rules):

1. Mark the metadata IN_RECOVERY (CAS; a ledger already IN_RECOVERY is
   recovered again -- a previous recoverer may have died).
2. Fence: ``read_entry(LAST_ENTRY, fence=True)`` on every bookie of the last
   ensemble.  A fenced bookie refuses normal adds from then on.  Recovery goes
   on only with *ack-quorum coverage*: every write set has at least
   ``Qw - Qa + 1`` bookies that answered, so no write set keeps Qa unfenced
   bookies and the old writer can never complete another add.
3. The highest LAC seen (piggy-backed in the entries the bookies returned),
   and at least ``first entry of the last fragment - 1``, is known confirmed.
4. Read forward from LAC + 1, asking the whole write set of each entry: a
   verified copy anywhere means the entry may have been acknowledged and is
   recovered; "missing" from ``Qw - Qa + 1`` bookies of the write set means
   it cannot have reached Qa and ends the ledger; anything else is undecided
   and fails the recovery (LedgerRecoveryError, retriable).
5. Rewrite each recovered entry, exactly as framed by the writer, with
   recovery adds (accepted by fenced bookies) to its full write quorum,
   through a recovery-mode :class:`LedgerHandle` -- which changes the
   ensemble if a bookie fails on the way, in its own copy of the metadata
   only.
6. CAS the metadata to CLOSED with the last recovered entry, its length and
   the tail fragments as rewritten, in one write.  If someone else closed it
   meanwhile, their close stands.  A recovery that fails before this point
   leaves the metadata naming the original ensemble, which still holds every
   entry the writer had acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import replace

from magnetar.bookie import api as bookie_api
from magnetar.bookie.entry_format import DigestMismatch, MalformedEntry, encode_entry, parse_header
from magnetar.bookkeeper import api
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.errors import is_missing
from magnetar.bookkeeper.ledger_handle import LedgerHandle
from magnetar.bookkeeper.reader import EntryReader
from magnetar.bookkeeper.timeouts import with_timeout

log = logging.getLogger(__name__)


def has_ack_quorum_coverage(md: api.LedgerMetadata, ensemble: tuple[str, ...], answered: set[str]) -> bool:
    need = md.write_quorum - md.ack_quorum + 1
    n = len(ensemble)
    for i in range(n):
        write_set = [ensemble[(i + k) % n] for k in range(md.write_quorum)]
        if sum(1 for b in write_set if b in answered) < need:
            return False
    return True


class LedgerRecovery:
    def __init__(self, ctx: ClientContext, ledger_id: int) -> None:
        self._ctx = ctx
        self._ledger_id = ledger_id

    async def _update(self, mutate, known):  # type: ignore[no-untyped-def]
        ctx = self._ctx
        return await with_timeout(
            ctx.clock,
            ctx.ledgers.update(self._ledger_id, mutate, known=known),
            ctx.config.metadata_timeout_ms,
            lambda: api.LedgerRecoveryError(f"ledger {self._ledger_id}: metadata update timed out"),
        )

    async def run(self) -> tuple[api.LedgerMetadata, int]:
        md, version = await self._ctx.ledgers.read(self._ledger_id)
        if md.is_closed:
            return md, version

        def mark(m: api.LedgerMetadata) -> api.LedgerMetadata:
            return replace(m, state=api.LedgerState.IN_RECOVERY) if m.state is api.LedgerState.OPEN else m

        md, version = await self._update(mark, (md, version))
        if md.is_closed:
            return md, version
        lac = await self._fence(md)
        reader = EntryReader(self._ctx, self._ledger_id, md.password)
        base_length = 0
        if lac >= 0:
            header, _ = await reader.read_entry(md.write_set(lac), lac)
            base_length = header.length
        handle = LedgerHandle(self._ctx, md, version, recovery=True, lac=lac, length=base_length)
        window: deque[asyncio.Future[int]] = deque()
        window_max = min(self._ctx.config.pending_adds_max, 1_000)
        try:
            entry_id = lac + 1
            while entry_id - lac <= self._ctx.config.recovery_entries_max:
                framed = await self._recovery_read(md, reader, entry_id)
                if framed is None:
                    break
                window.append(handle.add_framed_nowait(entry_id, framed, parse_header(framed).length))
                while len(window) >= window_max:
                    await window.popleft()
                entry_id += 1
            while window:
                await window.popleft()
            await handle.wait_pending()
        except api.LedgerFencedError:
            # Someone else moved the metadata on (closed it); theirs stands if closed.
            md, version = await self._ctx.ledgers.read(self._ledger_id)
            if md.is_closed:
                return md, version
            raise api.LedgerRecoveryError(f"ledger {self._ledger_id}: recovery lost a race") from None
        last, length = handle.last_add_confirmed, handle.length
        tail_start = md.ensembles[-1][0]
        tail = tuple(f for f in handle.metadata.ensembles if f[0] >= tail_start)
        log.info("ledger %d: recovered, closing at entry %d (LAC was %d)", self._ledger_id, last, lac)

        def close(m: api.LedgerMetadata) -> api.LedgerMetadata:
            if m.is_closed:
                return m
            if m.state is not api.LedgerState.IN_RECOVERY or m.ensembles[-1] != md.ensembles[-1]:
                raise api.LedgerRecoveryError(f"ledger {m.ledger_id}: metadata changed during recovery")
            # Earlier fragments as stored (a replication worker may have repaired one);
            # the tail as this recovery rewrote it (ensemble changes made while rewriting).
            head = tuple(f for f in m.ensembles if f[0] < tail_start)
            ensembles = head + tail
            return replace(
                m, state=api.LedgerState.CLOSED, last_entry_id=last, length=length, ensembles=ensembles
            )

        return await self._update(close, (md, version))

    async def _fence(self, md: api.LedgerMetadata) -> int:
        ctx = self._ctx
        last_first, ensemble = md.ensembles[-1]

        async def fence_one(bookie: str) -> int:
            try:
                raw = await with_timeout(
                    ctx.clock,
                    ctx.pool.get(bookie).read_entry(
                        self._ledger_id, bookie_api.LAST_ENTRY, fence=True, master_key=md.password
                    ),
                    ctx.config.read_timeout_ms,
                    lambda: bookie_api.BookieTimeoutError("fence timed out", bookie),
                )
            except bookie_api.BookieError as exc:
                if is_missing(exc):
                    return -1
                raise
            try:
                return parse_header(raw).lac
            except MalformedEntry:
                return -1

        results = await asyncio.gather(*(fence_one(b) for b in ensemble), return_exceptions=True)
        answered = {b for b, r in zip(ensemble, results, strict=True) if isinstance(r, int)}
        for r in results:
            if isinstance(r, bookie_api.UnauthorizedAccessError):
                raise api.LedgerRecoveryError(f"ledger {self._ledger_id}: wrong password on fence")
        if not has_ack_quorum_coverage(md, ensemble, answered):
            raise api.LedgerRecoveryError(
                f"ledger {self._ledger_id}: fenced only {sorted(answered)} of {list(ensemble)}; no ack-quorum coverage"
            )
        lac = max((r for r in results if isinstance(r, int)), default=-1)
        return max(lac, last_first - 1)

    async def _recovery_read(
        self, md: api.LedgerMetadata, reader: EntryReader, entry_id: int
    ) -> bytes | None:
        write_set = md.write_set(entry_id)
        results = await asyncio.gather(
            *(reader.read_from(b, entry_id) for b in write_set), return_exceptions=True
        )
        for r in results:
            if isinstance(r, tuple):
                header, payload = r
                return encode_entry(self._ledger_id, entry_id, header.lac, header.length, payload)
        missing = sum(1 for r in results if is_missing(r))
        if missing >= md.write_quorum - md.ack_quorum + 1:
            return None
        reasons = [type(r).__name__ for r in results]
        if any(isinstance(r, DigestMismatch) for r in results):
            log.warning("ledger %d entry %d: corrupt replica during recovery", self._ledger_id, entry_id)
        raise api.LedgerRecoveryError(f"ledger {self._ledger_id}: cannot decide entry {entry_id} ({reasons})")
