"""The compacted view of a topic, for ``read_compacted`` consumers and readers.

Theory of operation: a read_compacted subscription sees the topic as if every
message up to the compaction horizon had been replaced by the compacted
ledger's content, and the live topic after it.  A
:class:`CompactedTopicReader` is made per subscription (per cursor) by the
dispatcher and used *instead of* ``cursor.read_entries``:

* it keeps its own logical read position ``next_position`` in the topic's
  position space.  It may point into ledgers that retention already trimmed
  (the compacted ledger still has their surviving messages), which a managed
  cursor's read position cannot do -- Pulsar forces its cursor's seek for the
  same reason;
* while ``next_position <= horizon`` it serves entries from the compacted
  ledger: a binary search over the compacted entries' original positions
  (see :mod:`.framing`) finds the first one ``>= next_position``, then up to
  ``max_entries`` are read in order.  Entries come back as managed-ledger
  :class:`~magnetar.managed_ledger.api.Entry` objects carrying their
  *original* position and the stored bytes (header stripped), so the
  dispatcher sends them like any other entry;
* past the compacted ledger it seeks the cursor to ``horizon + 1`` and reads
  the live topic through the cursor as usual.

The horizon is read from the ``__compaction`` cursor on every call (a dict
lookup), so a finished compaction is picked up at once; if the compacted
ledger it was reading is deleted under it (a newer compaction won the race)
the read is retried once with the fresh horizon.  Entries of the compacted
ledger in ledgers that still exist are filtered by the subscription's acks;
entries from trimmed ledgers cannot be acknowledged durably (a managed cursor
cannot hold positions before its first ledger), so after a reconnect a durable
read_compacted subscription gets them again -- like Pulsar's.

Bounds: an LRU of ``position_cache_entries`` compacted entry id -> original
position keeps repeated binary searches cheap; one open read handle per
compacted ledger.
"""

from __future__ import annotations

from collections import OrderedDict

from magnetar.bookkeeper.api import (
    BKError,
    BookKeeper,
    LedgerClosedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ReadHandle,
)
from magnetar.broker.compaction.compactor import CompactionHorizon, read_horizon
from magnetar.broker.compaction.errors import CompactionError
from magnetar.broker.compaction.framing import decode_compacted_entry, decode_position
from magnetar.managed_ledger.api import Entry, ManagedCursor, ManagedLedger, Position

_ATTEMPTS = 3  # a compacted ledger replaced under a read is searched again, this often


class CompactedTopicReader:
    def __init__(
        self,
        ml: ManagedLedger,
        cursor: ManagedCursor,
        bookkeeper: BookKeeper,
        *,
        start: Position | None = None,
        password: bytes = b"",
        position_cache_entries: int = 4096,
    ) -> None:
        """``start``: the first position to deliver; ``Position.EARLIEST`` for a subscription or
        reader starting at the earliest message (the compacted ledger's first entry); default:
        the cursor's read position."""
        self._ml = ml
        self._cursor = cursor
        self._bk = bookkeeper
        self._password = password
        self.next_position = start if start is not None else cursor.read_position
        self._handle: ReadHandle | None = None
        self._positions: OrderedDict[tuple[int, int], Position] = OrderedDict()
        self._positions_max = position_cache_entries

    @property
    def horizon(self) -> CompactionHorizon | None:
        return read_horizon(self._ml)

    # -- positioning (the dispatcher calls these instead of the cursor's) -------------------

    async def seek(self, position: Position) -> None:
        """Next entry delivered is the first one at or after ``position``."""
        self.next_position = position
        await self._cursor.seek(position)

    def rewind(self) -> None:
        """Redeliver from the first unacknowledged position (reconnect / redelivery)."""
        self.next_position = self._cursor.mark_delete_position.next()
        self._cursor.rewind()

    def has_more_entries(self) -> bool:
        horizon = self.horizon
        if horizon is not None and self.next_position <= horizon.position:
            return True
        return self._cursor.has_more_entries()

    # -- reads -----------------------------------------------------------------------------

    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Up to ``max_entries`` entries of the compacted view from ``next_position``; [] when
        caught up with the live topic (or, rarely, when compactions kept replacing the ledger
        under this read: call again)."""
        for _attempt in range(_ATTEMPTS):
            horizon = self.horizon
            if horizon is None or self.next_position > horizon.position:
                return await self._read_live(max_entries, max_bytes)
            try:
                entries = await self._read_compacted(horizon, max_entries, max_bytes)
            except (NoSuchLedgerError, LedgerClosedError, NoSuchEntryError):
                await self._drop_handle()
                if self.horizon == horizon:
                    raise CompactionError(f"compacted ledger {horizon.ledger_id} vanished") from None
                continue  # a newer compaction replaced it: search the new one
            except BKError as e:
                raise CompactionError(f"reading compacted ledger {horizon.ledger_id}: {e!r}") from e
            if entries:
                return entries
            if self.horizon != horizon:
                continue  # replaced while we read: the live range up to the new horizon may be trimmed
            # The compacted ledger holds nothing at or after next_position: go live.
            self.next_position = horizon.position.next()
            await self._cursor.seek(self.next_position)
            return await self._read_live(max_entries, max_bytes)
        return []

    async def read_entries_or_wait(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Like read_entries but waits for new live entries when caught up (cancel to stop)."""
        for _attempt in range(_ATTEMPTS):
            entries = await self.read_entries(max_entries, max_bytes)
            if entries:
                return entries
            horizon = self.horizon
            if horizon is None or self.next_position > horizon.position:
                break  # caught up with the live topic: wait there
        entries = await self._cursor.read_entries_or_wait(max_entries, max_bytes)
        self._advance_live(entries)
        return entries

    async def _read_live(self, max_entries: int, max_bytes: int | None) -> list[Entry]:
        if self._cursor.read_position < self.next_position:
            await self._cursor.seek(self.next_position)
        entries = await self._cursor.read_entries(max_entries, max_bytes)
        self._advance_live(entries)
        return entries

    def _advance_live(self, entries: list[Entry]) -> None:
        if entries:
            self.next_position = entries[-1].position.next()

    async def _read_compacted(
        self, horizon: CompactionHorizon, max_entries: int, max_bytes: int | None
    ) -> list[Entry]:
        handle = await self._open(horizon.ledger_id)
        last = handle.last_add_confirmed
        first = await self._find(handle, self.next_position, last)
        out: list[Entry] = []
        nbytes = 0
        first_live_ledger = self._first_ledger_id()
        while first <= last and len(out) < max_entries:
            chunk = await handle.read(first, min(last, first + max_entries - len(out) - 1))
            for e in chunk:
                first = e.entry_id + 1
                position, stored = decode_compacted_entry(e.data)
                self.next_position = position.next()
                if position.ledger_id >= first_live_ledger and self._cursor.is_acknowledged(position):
                    continue
                out.append(Entry(position, stored))
                nbytes += len(stored)
                if max_bytes is not None and nbytes >= max_bytes:
                    break
            if max_bytes is not None and nbytes >= max_bytes:
                break
        if first > last and out and self.horizon == horizon:
            # Everything compacted is delivered (and no newer compaction replaced it meanwhile,
            # whose ledger would hold what retention may have trimmed): the next read goes live.
            self.next_position = max(self.next_position, horizon.position.next())
            await self._cursor.seek(self.next_position)
        return out

    def _first_ledger_id(self) -> int:
        ledgers = self._ml.ledgers()
        return ledgers[0].ledger_id if ledgers else 2**63 - 1

    async def _find(self, handle: ReadHandle, target: Position, last: int) -> int:
        """The first compacted entry id whose original position is >= ``target`` (last+1 if none)."""
        lo, hi = 0, last + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if await self._position_of(handle, mid) < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def _position_of(self, handle: ReadHandle, entry_id: int) -> Position:
        key = (handle.ledger_id, entry_id)
        cached = self._positions.get(key)
        if cached is not None:
            self._positions.move_to_end(key)
            return cached
        (entry,) = await handle.read(entry_id, entry_id)
        position = decode_position(entry.data)
        self._positions[key] = position
        if len(self._positions) > self._positions_max:
            self._positions.popitem(last=False)
        return position

    async def _open(self, ledger_id: int) -> ReadHandle:
        if self._handle is not None and self._handle.ledger_id == ledger_id:
            return self._handle
        await self._drop_handle()
        self._handle = await self._bk.open_ledger(ledger_id, password=self._password, recovery=False)
        return self._handle

    async def _drop_handle(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                await handle.close()
            except BKError:
                pass

    async def close(self) -> None:
        await self._drop_handle()
        self._positions.clear()
