"""ManagedCursorImpl: a subscription's position in a managed ledger.

Theory of operation
-------------------
State: ``mark_delete`` (everything at or before it is acknowledged), the
individually acknowledged positions after it (a
:class:`~magnetar.common.rangeset.PositionRangeSet`, one int range set per
ledger -- the "ack holes" are what lies between the ranges), the ack sets of
partly acknowledged batch entries (words, bit i set = message i pending), the
``read_position`` and the cursor's properties.

Acks: an individual ack adds to the range set; whenever the first range starts
at the first existing position after mark-delete, mark-delete jumps to its end
and the range goes (that is how a filled hole moves mark-delete, across ledger
boundaries too).  A batch-index ack ANDs the pending bits; all-zero means the
whole entry is acked.  Acks before mark-delete are ignored.

Reads skip acknowledged ranges without reading them and filter acked entries
inside a read run (Pulsar does the same), splitting runs at ledger boundaries.

Persistence (durable cursors only) is group-committed by
:class:`~magnetar.managed_ledger.persister.CursorPersister` through
:class:`~magnetar.managed_ledger.cursor_store.CursorStore`.  With
``mark_delete_rate_per_s == 0`` an ack returns once a snapshot containing it
is durable; with a rate (the broker's managedLedgerDefaultMarkDeleteRateLimit,
1/s), acks return at once and snapshots are written at most ``rate`` times a
second (a crash loses at most the last interval's acks: those messages are
redelivered, never lost); close, and a mark-delete that sets properties (a
system cursor's own state), write the latest state at once.  At most
``max_unacked_ranges_to_persist`` ranges (the ones nearest mark-delete) and as
many ack sets are written: acks beyond the cap are lost on restart, i.e. those
messages are redelivered.  :meth:`flush` waits for everything to be durable.
Trimming uses the smaller of the in-memory and the persisted mark-delete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from magnetar.common.rangeset import PositionRangeSet
from magnetar.managed_ledger import trimmer
from magnetar.managed_ledger.api import (
    CursorAlreadyClosedError,
    Entry,
    InvalidCursorPositionError,
    ManagedLedgerError,
    ManagedLedgerStorageError,
    NoMoreEntriesError,
    Position,
)
from magnetar.managed_ledger.cursor_store import CursorStore
from magnetar.managed_ledger.metadata import CursorInfo
from magnetar.managed_ledger.persister import CursorPersister
from magnetar.managed_ledger.snapshot import CursorSnapshot
from magnetar.managed_ledger.state import CursorState, MLState
from magnetar.managed_ledger.stats import cursor_stats

if TYPE_CHECKING:
    from magnetar.managed_ledger.ledger import ManagedLedgerImpl

_READ_ATTEMPTS_MAX = 3


class ManagedCursorImpl:
    def __init__(self, ml: ManagedLedgerImpl, name: str, md: Position, store: CursorStore | None) -> None:
        self.ml = ml
        self._name = name
        self._store = store
        self.state = CursorState.OPEN
        self._md = md
        # The mark-delete of the last durable snapshot: trimming uses min(this, _md), so a
        # ledger is never deleted on the strength of an ack that could still be lost.
        self.persisted_md = md
        self._read = md.next()
        self._moves = 0  # bumped by rewind/seek/reset: a read in flight then keeps its hands off
        self.acked = PositionRangeSet()
        self.ack_sets: dict[tuple[int, int], list[int]] = {}
        self._props: dict[str, int] = {}
        self.messages_consumed = 0
        self._persister = CursorPersister(name, ml, store, self) if store is not None else None

    # -- construction --------------------------------------------------------------------------

    @classmethod
    async def create(
        cls, ml: ManagedLedgerImpl, name: str, md: Position, props: dict[str, int]
    ) -> ManagedCursorImpl:
        info = CursorInfo(mark_delete=md, properties=dict(props))
        store = CursorStore(ml.ctx, ml.name, name, info, -1)
        await store.create()
        cursor = cls(ml, name, md, store)
        cursor._props = dict(props)
        return cursor

    @classmethod
    def non_durable(cls, ml: ManagedLedgerImpl, name: str, md: Position) -> ManagedCursorImpl:
        return cls(ml, name, md, None)

    @classmethod
    async def recover(cls, ml: ManagedLedgerImpl, name: str, raw: bytes, version: int) -> ManagedCursorImpl:
        try:
            info = CursorInfo.decode(raw)
        except (ValueError, KeyError, TypeError) as e:
            raise ManagedLedgerStorageError(f"corrupt cursor info for {name}: {e}") from e
        store = CursorStore(ml.ctx, ml.name, name, info, version)
        await store.claim()
        snap = await store.recover(ml.config.password)
        cursor = cls(ml, name, Position(*snap.mark_delete), store)
        md = snap.mark_delete
        for lo, hi in snap.ranges:
            if lo > md:
                cursor.acked.add_range(lo, hi)
        cursor.ack_sets = {tuple(p): list(w) for p, w in snap.ack_sets if tuple(p) > md}
        cursor._props = dict(snap.properties)
        cursor._absorb()
        cursor.persisted_md = cursor._md
        cursor._read = cursor._md.next()
        return cursor

    # -- properties -------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def durable(self) -> bool:
        return self._store is not None

    @property
    def is_open(self) -> bool:
        return self.state is CursorState.OPEN

    @property
    def mark_delete_position(self) -> Position:
        return self._md

    @property
    def read_position(self) -> Position:
        ll = self.ml.ledger_list
        return self._skip_acked(ll.next_valid(max(self._read, self._md.next())))

    @property
    def properties(self) -> Mapping[str, int]:
        return dict(self._props)

    @property
    def store(self) -> CursorStore | None:
        return self._store

    def _check_open(self) -> None:
        if self.state is not CursorState.OPEN:
            raise CursorAlreadyClosedError(f"cursor {self._name} is closed")

    # -- reads ----------------------------------------------------------------------------------

    def has_more_entries(self) -> bool:
        return self.read_position <= self.ml.ledger_list.last_confirmed

    def _skip_acked(self, pos: Position) -> Position:
        acked = self.acked
        if not acked:
            return pos
        ll = self.ml.ledger_list
        while True:
            r = acked.range_containing((pos.ledger_id, pos.entry_id))
            if r is None:
                return pos
            pos = ll.next_valid(Position(pos.ledger_id, r[1][1] + 1))

    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        for _attempt in range(_READ_ATTEMPTS_MAX):
            self._check_open()
            moves = self._moves
            out, pos = await self._read_from(self.read_position, max_entries, max_bytes)
            if moves == self._moves:
                self._read = pos
                self.messages_consumed += len(out)
                return out
            # Moved (seek/reset/rewind) while reading: read again from the new position.
        return []

    async def _read_from(
        self, pos: Position, max_entries: int, max_bytes: int | None
    ) -> tuple[list[Entry], Position]:
        ll, reader = self.ml.ledger_list, self.ml.reader
        lac = ll.last_confirmed
        out: list[Entry] = []
        nbytes = 0
        acked = self.acked
        while len(out) < max_entries and pos <= lac:
            lid = pos.ledger_id
            last = min(ll.entries_of(lid) - 1, pos.entry_id + (max_entries - len(out)) - 1)
            if lid == lac.ledger_id:
                last = min(last, lac.entry_id)
                if last < pos.entry_id:  # the list says the ledger ends before pos, yet pos <= LAC
                    raise ManagedLedgerStorageError(
                        f"{self._name}: {pos} is confirmed (last {lac}) but ledger {lid} has "
                        f"{ll.entries_of(lid)} entries; not reading past it"
                    )
            entries = await reader.read_range(lid, pos.entry_id, last)
            stop = False
            for e in entries:
                if acked and acked.contains((lid, e.position.entry_id)):
                    continue
                out.append(e)
                nbytes += len(e.data)
                if max_bytes is not None and nbytes >= max_bytes:
                    last = e.position.entry_id
                    stop = True
                    break
            pos = self._skip_acked(ll.next_valid(Position(lid, last + 1)))
            if stop:
                break
        return out, pos

    async def read_entries_or_wait(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        while True:
            entries = await self.read_entries(max_entries, max_bytes)
            if entries:
                return entries
            ml = self.ml
            if ml.state is MLState.TERMINATED and not self.has_more_entries():
                raise NoMoreEntriesError(f"{ml.name} is terminated and cursor {self._name} read everything")
            if ml.state in (MLState.CLOSED, MLState.FENCED):
                ml._check_open()
            if not self.has_more_entries():
                await ml.wait_for_entries_after(ml.ledger_list.last_confirmed)

    async def peek_entries(self, n: int) -> list[Entry]:
        """The first ``n`` unacknowledged entries after mark-delete, without moving the read
        position (admin peek)."""
        self._check_open()
        ll, reader = self.ml.ledger_list, self.ml.reader
        pos = self._skip_acked(ll.next_valid(self._md.next()))
        out: list[Entry] = []
        while len(out) < n and pos <= ll.last_confirmed:
            e = await reader.read_entry(pos, read_ahead=False)
            out.append(e)
            pos = self._skip_acked(ll.next_valid(pos.next()))
        return out

    async def replay_entries(self, positions: Sequence[Position]) -> list[Entry]:
        self._check_open()
        ll, reader = self.ml.ledger_list, self.ml.reader
        wanted = [
            p
            for p in sorted(set(positions))
            # acked meanwhile, or its ledger was trimmed: nothing to redeliver
            if not self.is_acknowledged(p) and 0 <= p.entry_id < ll.entries_of(p.ledger_id)
        ]
        out: list[Entry] = []
        i = 0
        while i < len(wanted):  # one read per run of consecutive positions, not one per entry
            first = wanted[i]
            j = i + 1
            while (
                j < len(wanted)
                and wanted[j].ledger_id == first.ledger_id
                and wanted[j].entry_id == wanted[j - 1].entry_id + 1
            ):
                j += 1
            out.extend(
                await reader.read_range(first.ledger_id, first.entry_id, wanted[j - 1].entry_id, False)
            )
            i = j
        return out

    # -- acks -------------------------------------------------------------------------------------

    def is_acknowledged(self, position: Position) -> bool:
        return position <= self._md or self.acked.contains((position.ledger_id, position.entry_id))

    def get_ack_set(self, position: Position) -> list[int] | None:
        words = self.ack_sets.get((position.ledger_id, position.entry_id))
        return list(words) if words is not None else None

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        return [(Position(lo[0], lo[1] - 1), Position(*hi)) for lo, hi in self.acked]

    async def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        self._check_open()
        if position > self.ml.ledger_list.last_confirmed:
            raise InvalidCursorPositionError(f"mark-delete {position} is after the last entry")
        if properties is not None:
            self._props = dict(properties)
        old = self._md
        if position > old:
            self._set_md(position)
        await self._changed(old)
        if properties is not None and self._persister is not None and self._persister.rate_per_s > 0:
            # Properties carry a system cursor's own state (a compacted ledger id, dedup
            # sequence ids, a transaction log's position): written at once, not lazily.
            await self.flush()

    async def delete(self, positions: Sequence[Position]) -> None:
        self._check_open()
        old = self._md
        lac = self.ml.ledger_list.last_confirmed
        old_t, lac_t = (old.ledger_id, old.entry_id), (lac.ledger_id, lac.entry_id)
        acked, ack_sets = self.acked, self.ack_sets
        # Plain tuples (C comparisons), and one range-set insert per run of consecutive
        # entries: a client's grouped ACK names hundreds of neighbours.
        keys = sorted({(p.ledger_id, p.entry_id) for p in positions})
        run_lo: tuple[int, int] | None = None
        run_hi = (0, 0)
        for t in keys:
            if t <= old_t:
                continue
            if t > lac_t:
                if run_lo is not None:
                    acked.add_range(run_lo, run_hi)
                raise InvalidCursorPositionError(f"ack of {Position(*t)} after the last entry {lac}")
            if ack_sets:
                ack_sets.pop(t, None)
            if run_lo is not None and t[0] == run_hi[0] and t[1] == run_hi[1] + 1:
                run_hi = t
                continue
            if run_lo is not None:
                acked.add_range(run_lo, run_hi)
            run_lo = run_hi = t
        if run_lo is not None:
            acked.add_range(run_lo, run_hi)
        self._absorb()
        await self._changed(old)

    async def ack_batch_indexes(self, position: Position, ack_set: Sequence[int]) -> None:
        self._check_open()
        t = (position.ledger_id, position.entry_id)
        if position <= self._md or self.acked.contains(t):
            return
        old = self.ack_sets.get(t)
        new = list(ack_set) if old is None else [a & b for a, b in zip(old, ack_set, strict=False)]
        if not any(new):
            await self.delete([position])
            return
        if position > self.ml.ledger_list.last_confirmed:
            raise InvalidCursorPositionError(f"ack of {position} after the last entry")
        self.ack_sets[t] = new
        await self._changed(self._md)

    def _set_md(self, position: Position) -> None:
        self._md = position
        t = (position.ledger_id, position.entry_id)
        self.acked.remove_up_to(t)
        if self.ack_sets:
            for k in [k for k in self.ack_sets if k <= t]:
                del self.ack_sets[k]
        self._absorb()

    def _absorb(self) -> None:
        """Move mark-delete over the first acked range while it starts right after it."""
        ll = self.ml.ledger_list
        while True:
            r = self.acked.first_range()
            if r is None:
                return
            nxt = ll.next_valid(self._md.next())
            if (nxt.ledger_id, nxt.entry_id) < r[0]:
                return
            self._md = Position(*r[1])
            self.acked.remove_up_to(r[1])
            if self.ack_sets:
                for k in [k for k in self.ack_sets if k <= r[1]]:
                    del self.ack_sets[k]

    async def _changed(self, old_md: Position) -> None:
        if self._read <= self._md:
            self._read = self._md.next()
        await self._persist()

    # -- moving ------------------------------------------------------------------------------------

    def rewind(self) -> None:
        self._moves += 1
        self._read = self.ml.ledger_list.next_valid(self._md.next())

    async def seek(self, position: Position) -> None:
        self._check_open()
        self._moves += 1
        self._read = max(position, self._md.next())

    async def reset_cursor(self, position: Position) -> None:
        self._check_open()
        ll = self.ml.ledger_list
        lac = ll.last_confirmed
        if position == Position.EARLIEST:  # type: ignore[attr-defined]
            position = ll.first_position()
        elif position > lac:
            position = lac.next()
        else:
            position = ll.next_valid(position)
        old = self._md
        self._moves += 1
        self._md = ll.previous(position) if position <= lac else lac
        self.acked.clear()
        self.ack_sets.clear()
        self._read = position
        await self._changed(old)

    async def skip_entries(self, n: int) -> None:
        """Acknowledge the next ``n`` unacknowledged entries after mark-delete."""
        self._check_open()
        if n <= 0:
            return
        ll = self.ml.ledger_list
        lac = ll.last_confirmed
        pos = ll.next_valid(self._md.next())
        remaining = n
        target = None
        for lo, hi in self.acked:
            before = ll.count_between(ll.previous(pos), ll.previous(Position(*lo)))
            if before >= remaining:
                target = ll.advance(pos, remaining - 1)
                break
            remaining -= before
            pos = ll.next_valid(Position(hi[0], hi[1] + 1))
        if target is None:
            target = ll.advance(pos, remaining - 1)
        if target > lac:
            target = lac
        old = self._md
        if target > old:
            self._set_md(target)
        await self._changed(old)

    async def clear_backlog(self) -> None:
        self._check_open()
        old = self._md
        lac = self.ml.ledger_list.last_confirmed
        if lac > old:
            self._set_md(lac)
        self.acked.clear()
        self.ack_sets.clear()
        await self._changed(old)

    async def find_position_by_publish_time(self, timestamp_ms: int, publish_time_of) -> Position:
        return await trimmer.find_first_at_or_after(self.ml, timestamp_ms, publish_time_of)

    async def expire_messages(self, ttl_ms: int, publish_time_of) -> bool:
        """Acknowledge (by moving mark-delete) every entry published more than ``ttl_ms`` ago."""
        return await trimmer.expire_messages(self, ttl_ms, publish_time_of)

    # -- counts and stats ------------------------------------------------------------------------

    @property
    def trim_position(self) -> Position:
        """What this cursor still protects from trimming: the smaller of the in-memory and
        the durably persisted mark-delete."""
        return min(self._md, self.persisted_md)

    def number_of_entries_in_backlog(self) -> int:
        n = (
            self.ml.ledger_list.count_between(self._md, self.ml.ledger_list.last_confirmed)
            - self.acked.count()
        )
        return max(n, 0)

    def estimated_backlog_size_bytes(self) -> int:
        """Bytes of the entries after mark-delete (individual acks not subtracted, as Pulsar)."""
        return self.ml.ledger_list.size_after(self._md)

    def backlog_size_bytes(self) -> int:
        """Bytes of the unacknowledged entries: after mark-delete, minus the individually
        acked ranges (exact for entries whose size the ledger recorded, see :mod:`.counts`).
        A partly acknowledged batch counts whole: its entry is still needed."""
        ll, counts = self.ml.ledger_list, self.ml.message_counts
        total = ll.bytes_between(self._md, ll.last_confirmed, counts)
        for lo, hi in self.acked:
            total -= ll.bytes_between(Position(lo[0], lo[1] - 1), Position(*hi), counts)
        return max(total, 0)

    def number_of_messages_in_backlog(self) -> int:
        """Unacknowledged messages: batch sizes from ``add_entry(num_messages=)``, minus the
        acknowledged indexes of partly acked batches (see :mod:`.counts` for the estimate
        after a restart)."""
        ml = self.ml
        ll, counts = ml.ledger_list, ml.message_counts
        total = ll.messages_between(self._md, ll.last_confirmed, counts)
        for lo, hi in self.acked:
            if lo[0] in ll:
                total -= counts.messages_in(lo[0], lo[1], hi[1])
        for (lid, eid), words in self.ack_sets.items():
            size = counts.batch_size(lid, eid)
            pending = sum(bin(w).count("1") for w in words)
            total -= max(0, size - pending)
        return max(total, 0)

    def stats(self) -> dict:
        return cursor_stats(self)

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self) -> CursorSnapshot:
        cap = self.ml.config.max_unacked_ranges_to_persist
        ack_sets = sorted(self.ack_sets.items())[:cap]
        return CursorSnapshot(
            (self._md.ledger_id, self._md.entry_id),
            self.acked.to_pairs(cap),
            [(p, list(w)) for p, w in ack_sets],
            dict(self._props),
        )

    async def _persist(self) -> None:
        p = self._persister
        if p is None:
            return
        seq = p.changed()
        if p.rate_per_s > 0:
            return
        await p.wait(seq)

    def snapshot_durable(self, snap: CursorSnapshot) -> None:
        old_ledger = self.persisted_md.ledger_id
        self.persisted_md = Position(*snap.mark_delete)
        if self.persisted_md.ledger_id != old_ledger:
            self.ml.schedule_trim()  # a ledger may be fully consumed now

    async def flush(self) -> None:
        """Wait until every change so far is in a durable snapshot."""
        if self._persister is not None:
            await self._persister.flush()

    async def close(self) -> None:
        if self.state is CursorState.CLOSED:
            return
        self.state = CursorState.CLOSING
        try:
            await self.flush()
        except ManagedLedgerError:
            pass
        if self._store is not None:
            await self._store.close()
        self.state = CursorState.CLOSED

    async def delete_durable_state(self) -> None:
        if self.state is not CursorState.CLOSED:
            self.state = CursorState.CLOSING
            self.state = CursorState.CLOSED
        if self._persister is not None:
            self._persister.cancel(CursorAlreadyClosedError(f"cursor {self._name} deleted"))
        if self._store is not None:
            await self._store.delete(self.ml.config)
