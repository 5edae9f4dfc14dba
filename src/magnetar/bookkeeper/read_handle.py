"""A read-only view of a ledger (open without recovery, or after recovery).

Theory of operation: the handle holds the metadata it was opened with and a
LAC.  For a CLOSED ledger the LAC is the last entry id and never changes.
For an OPEN ledger it is the highest LAC the bookies of the last ensemble
reported (at least ``first entry of the last fragment - 1``: an ensemble
change starts a fragment after the writer's LAC), and
:meth:`read_last_add_confirmed` asks again; the LAC only moves forward.
The metadata is re-read when the bookies report no progress (the writer may
have closed the ledger: then the LAC becomes its last entry) and when a read
fails (the ensemble may have changed since we opened it).
Reads past the LAC raise NoSuchEntryError, past a closed ledger's end
LedgerClosedError.
"""

from __future__ import annotations

from magnetar.bookkeeper import api
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.reader import EntryReader
from magnetar.bookkeeper.timeouts import with_timeout
from magnetar.metadata.api import MetadataError


def check_range(md: api.LedgerMetadata, lac: int, first: int, last: int) -> None:
    if first < 0 or last < first:
        raise api.NoSuchEntryError(f"ledger {md.ledger_id}: bad range {first}..{last}")
    if md.is_closed and last > md.last_entry_id:
        raise api.LedgerClosedError(
            f"ledger {md.ledger_id} is closed at entry {md.last_entry_id}; cannot read {first}..{last}"
        )
    if last > lac:
        raise api.NoSuchEntryError(f"ledger {md.ledger_id}: entry {last} is past the LAC {lac}")


class ReadOnlyLedgerHandle:
    def __init__(self, ctx: ClientContext, md: api.LedgerMetadata, lac: int, length: int = 0) -> None:
        self._ctx = ctx
        self._md = md
        self._lac = md.last_entry_id if md.is_closed else max(lac, md.ensembles[-1][0] - 1)
        self._length = md.length if md.is_closed else length
        self._reader = EntryReader(ctx, md.ledger_id, md.password)
        self._closed = False

    @property
    def ledger_id(self) -> int:
        return self._md.ledger_id

    @property
    def metadata(self) -> api.LedgerMetadata:
        return self._md

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._length

    def _check_open(self) -> None:
        if self._closed:
            raise api.BKClosedError(f"handle of ledger {self.ledger_id} is closed")

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[api.LedgerEntry]:
        self._check_open()
        check_range(self._md, self._lac, first_entry_id, last_entry_id)
        try:
            return await self._reader.read_range(self._md, first_entry_id, last_entry_id)
        except api.BKError:
            # Our metadata may be stale (the writer changed the ensemble, or a replication
            # worker moved a fragment): read it again and retry once.
            if not await self._refresh_metadata():
                raise
            return await self._reader.read_range(self._md, first_entry_id, last_entry_id)

    async def read_last_add_confirmed(self) -> int:
        self._check_open()
        if self._md.is_closed:
            return self._lac
        lac = await self._reader.read_lac(self._md.ensembles[-1][1])
        if lac <= self._lac:
            # No progress: the writer may have closed the ledger (its final LAC never
            # reaches the bookies), so look at the metadata.
            await self._refresh_metadata()
        if not self._md.is_closed:
            self._lac = max(self._lac, lac)
        return self._lac

    async def _refresh_metadata(self) -> bool:
        """Re-read the ledger's metadata; True if it changed."""
        try:
            md, _ = await with_timeout(
                self._ctx.clock,
                self._ctx.ledgers.read(self.ledger_id),
                self._ctx.config.metadata_timeout_ms,
                lambda: api.BKTimeoutError("metadata read timed out"),
            )
        except (api.BKError, MetadataError):
            return False
        if md == self._md:
            return False
        self._md = md
        if md.is_closed:
            self._lac = md.last_entry_id
            self._length = md.length
        return True

    async def close(self) -> None:
        self._closed = True
