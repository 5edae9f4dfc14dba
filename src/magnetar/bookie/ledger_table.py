"""The bookie's table of ledgers: master key, fenced, deleted, LAC seen, last entry.

Theory of operation: every ledger this bookie has ever stored an entry of (or
been asked to fence) has a :class:`~magnetar.bookie.index.LedgerState` here,
in memory, loaded from the index at start.  Changes mark the ledger *dirty*;
a checkpoint takes the dirty states (``take_dirty``) and writes them with the
entry locations, or hands them back (``restore_dirty``) when the flush fails.

Deletion (GC) keeps the state as a *deleted marker* so that replaying old
journal records cannot bring the ledger back.  A marker remembers the
journal's enqueue count at deletion; once a checkpoint's mark covers every
record enqueued up to then (``prunable(synced_count)``), the marker is
forgotten.  Markers loaded at start carry count 0: the first regular
checkpoint after the replay covers them.  A write to a deleted ledger (a
zombie writer) creates a fresh state, as BookKeeper does; GC deletes it again.
"""

from __future__ import annotations

from collections.abc import Iterable

from magnetar.bookie.api import NoSuchLedgerError, UnauthorizedAccessError
from magnetar.bookie.index import LedgerState


class LedgerTable:
    def __init__(self, bookie_id: str = "") -> None:
        self.bookie_id = bookie_id
        self.states: dict[int, LedgerState] = {}
        self._dirty: set[int] = set()
        self._deleted_at: dict[int, int] = {}  # deleted ledger -> journal enqueue count at deletion

    def load(self, items: Iterable[tuple[int, LedgerState]]) -> None:
        for ledger_id, st in items:
            self.states[ledger_id] = st
            if st.deleted:
                self._deleted_at[ledger_id] = 0

    # --- lookups ----------------------------------------------------------------------------

    def live(self, ledger_id: int) -> LedgerState | None:
        st = self.states.get(ledger_id)
        return None if st is None or st.deleted else st

    def existing(self, ledger_id: int) -> LedgerState:
        st = self.live(ledger_id)
        if st is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} does not exist on this bookie", self.bookie_id)
        return st

    def exists(self, ledger_id: int) -> bool:
        return self.live(ledger_id) is not None

    def ids(self) -> list[int]:
        return sorted(lid for lid, st in self.states.items() if not st.deleted)

    def is_current(self, ledger_id: int, st: LedgerState) -> bool:
        """``st`` is still the live state of the ledger (not deleted or replaced meanwhile)."""
        return not st.deleted and self.states.get(ledger_id) is st

    # --- changes ----------------------------------------------------------------------------

    def for_write(self, ledger_id: int, master_key: bytes) -> tuple[LedgerState, bool]:
        """The ledger's state for an add or a fence, created on first use; (state, created)."""
        st = self.states.get(ledger_id)
        if st is None or st.deleted:
            st = self.states[ledger_id] = LedgerState(master_key=master_key)
            self._deleted_at.pop(ledger_id, None)
            self._dirty.add(ledger_id)
            return st, True
        if st.master_key != master_key:
            raise UnauthorizedAccessError(f"wrong master key for ledger {ledger_id}", self.bookie_id)
        return st, False

    def for_replay(self, ledger_id: int) -> LedgerState | None:
        """The state a replayed journal record applies to; None for a deleted ledger."""
        st = self.states.get(ledger_id)
        if st is not None and st.deleted:
            return None
        if st is None:
            st = self.states[ledger_id] = LedgerState()
        self._dirty.add(ledger_id)
        return st

    def mark_dirty(self, ledger_id: int) -> None:
        self._dirty.add(ledger_id)

    def take_dirty(self) -> dict[int, bytes]:
        """Encoded states of every dirty ledger (for a checkpoint); clears the dirty set."""
        out = {lid: self.states[lid].encode() for lid in sorted(self._dirty) if lid in self.states}
        self._dirty.clear()
        return out

    def restore_dirty(self, ledger_ids: Iterable[int]) -> None:
        self._dirty.update(ledger_ids)

    def mark_deleted(self, ledger_id: int, enqueued_count: int) -> LedgerState | None:
        st = self.live(ledger_id)
        if st is None:
            return None
        st.deleted = True
        self._deleted_at[ledger_id] = enqueued_count
        self._dirty.discard(ledger_id)
        return st

    def prunable(self, synced_count: int) -> list[int]:
        """Deleted markers no journal replay can need any more."""
        return [
            lid
            for lid, seq in sorted(self._deleted_at.items())
            if seq <= synced_count and (st := self.states.get(lid)) is not None and st.deleted
        ]

    def forget(self, ledger_ids: Iterable[int]) -> None:
        for lid in ledger_ids:
            self._deleted_at.pop(lid, None)
            st = self.states.get(lid)
            if st is not None and st.deleted:
                del self.states[lid]
