"""Reading entries: cache first, then bookies (with read-ahead), or an offloader.

Theory of operation: a read asks for entries ``first..last`` of one ledger
(cursors split their reads at ledger boundaries using
:class:`~magnetar.managed_ledger.positions.LedgerList`).  The shared
:class:`~magnetar.managed_ledger.cache.EntryCache` answers the leading run it
holds; the rest comes from one BookKeeper read that also fetches up to
``read_ahead_entries`` more (bounded by the ledger's last entry) into the
cache, so a backlogged cursor reading in small batches costs one bookie round
trip per read-ahead window, not per batch.

The ledger being written is read through its write handle (its LAC is ours);
closed ledgers through read handles opened without recovery, kept in a small
LRU (a ledger whose close failed, so its bookies' LAC lags the entry count in
our list, is opened with recovery instead); offloaded ledgers (complete
offload context: tiered storage first, as Pulsar's default read priority) through
the read handle of the offloader their context names -- the same entries, so
positions and message ids do not change.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from magnetar.bookkeeper.api import BKError, ReadHandle
from magnetar.managed_ledger.api import (
    Entry,
    LedgerInfo,
    ManagedLedgerConfig,
    ManagedLedgerStorageError,
    Position,
)
from magnetar.managed_ledger.context import READ_HANDLES_MAX, MLContext
from magnetar.managed_ledger.offload import DRIVERS, OffloadError
from magnetar.managed_ledger.positions import LedgerList


class ReadSource(Protocol):
    """What a reader needs of its managed ledger (read at each use: both change over time)."""

    @property
    def write_handle(self) -> ReadHandle | None: ...  # the ledger being written, read through it

    @property
    def config(self) -> ManagedLedgerConfig: ...  # password, read_ahead_entries, offload_policies


class LedgerReader:
    def __init__(self, ctx: MLContext, ledgers: LedgerList, source: ReadSource) -> None:
        self._ctx = ctx
        self._ledgers = ledgers
        self._source = source
        # read handles of closed ledgers (LRU); made on the first such read
        self._handles: OrderedDict[int, ReadHandle] | None = None
        self.entries_read_from_bookies = 0
        self.entries_read = 0  # from the cache or the bookies (pulsar_storage_read_rate)
        self.read_errors = 0

    async def read_range(self, ledger_id: int, first: int, last: int, read_ahead: bool = True) -> list[Entry]:
        """Entries first..last (inclusive) of one ledger; ``last`` must be confirmed.  All of
        them, in order, or ManagedLedgerStorageError: a short answer is an error."""
        cache = self._ctx.cache
        datas = cache.get_run(ledger_id, first, last)
        metas = cache.get_run_meta(ledger_id, first, len(datas)) if datas else None
        if metas is None:
            out = [Entry(Position(ledger_id, first + i), d) for i, d in enumerate(datas)]
        else:
            out = [
                Entry(Position(ledger_id, first + i), d, m)
                for i, (d, m) in enumerate(zip(datas, metas, strict=True))
            ]
        start = first + len(datas)
        self.entries_read += len(out)
        if start > last:
            return out
        end_of_ledger = self._ledgers.entries_of(ledger_id) - 1
        extra = self._source.config.read_ahead_entries if read_ahead else 0
        fetch_last = max(last, min(last + extra, end_of_ledger))
        handle = await self._handle_for(ledger_id)
        try:
            got = await handle.read(start, fetch_last)
        except (BKError, OffloadError) as e:
            self.read_errors += 1
            raise ManagedLedgerStorageError(f"read {ledger_id}:{start}..{fetch_last} failed: {e!r}") from e
        self.entries_read_from_bookies += len(got)
        for le in got:
            cache.put(ledger_id, le.entry_id, le.data)
            if le.entry_id <= last:
                out.append(Entry(Position(ledger_id, le.entry_id), le.data))
        self.entries_read += len(out) - len(datas)
        if len(out) != last - first + 1:  # never a silent gap: a cursor would step over it
            self.read_errors += 1
            raise ManagedLedgerStorageError(
                f"read {ledger_id}:{first}..{last} returned {len(out)} entries (of {last - first + 1})"
            )
        return out

    async def read_entry(self, pos: Position, read_ahead: bool = True) -> Entry:
        got = await self.read_range(pos.ledger_id, pos.entry_id, pos.entry_id, read_ahead)
        if not got:
            raise ManagedLedgerStorageError(f"entry {pos} not found")
        return got[0]

    async def _handle_for(self, ledger_id: int) -> ReadHandle:
        wh = self._source.write_handle
        if wh is not None and wh.ledger_id == ledger_id:
            return wh
        handles = self._handles
        if handles is None:
            handles = self._handles = OrderedDict()
        h = handles.get(ledger_id)
        if h is not None:
            handles.move_to_end(ledger_id)
            return h
        info = self._ledgers.get(ledger_id)
        try:
            if info is not None and info.offloaded:
                h = await self._open_offloaded(info)
            else:
                bk = self._ctx.bookkeeper
                h = await bk.open_ledger(ledger_id, password=self._source.config.password, recovery=False)
                if h.last_add_confirmed < self._ledgers.entries_of(ledger_id) - 1:
                    # Never closed (our close failed mid-rollover): the bookies' LAC lags the
                    # last entry.  We own the managed ledger, so recover (and close) it.
                    await _close_quietly(h)
                    h = await bk.open_ledger(ledger_id, password=self._source.config.password, recovery=True)
        except BKError as e:
            raise ManagedLedgerStorageError(f"cannot open ledger {ledger_id} for reading: {e!r}") from e
        except OffloadError as e:
            self.read_errors += 1
            raise ManagedLedgerStorageError(f"cannot open offloaded ledger {ledger_id}: {e}") from e
        handles[ledger_id] = h
        while len(handles) > READ_HANDLES_MAX:
            _, old = handles.popitem(last=False)
            await _close_quietly(old)
        return h

    async def _open_offloaded(self, info: LedgerInfo) -> ReadHandle:
        c = info.offload_context
        if c is None:  # offloaded before offload contexts were kept: the factory's offloader
            if self._ctx.offloader is None:
                raise OffloadError(f"ledger {info.ledger_id} is offloaded but no offloader is configured")
            return await self._ctx.offloader.read_offloaded(info.ledger_id, "", {})
        if c.driver_name in DRIVERS and self._ctx.offloaders is not None:
            off = self._ctx.offloaders.for_context(c, self._source.config.offload_policies)
        elif self._ctx.offloader is not None:
            off = self._ctx.offloader
        else:
            raise OffloadError(f"ledger {info.ledger_id} is offloaded ({c.driver_name}) but no offloader is configured")
        return await off.read_offloaded(info.ledger_id, c.uid, c.metadata())

    async def drop_ledger(self, ledger_id: int) -> None:
        self._ctx.cache.invalidate_ledger(ledger_id)
        h = self._handles.pop(ledger_id, None) if self._handles else None
        if h is not None:
            await _close_quietly(h)

    async def close(self) -> None:
        handles = list(self._handles.values()) if self._handles else []
        self._handles = None
        for h in handles:
            await _close_quietly(h)


async def _close_quietly(h: ReadHandle) -> None:
    try:
        await h.close()
    except BKError:
        pass
