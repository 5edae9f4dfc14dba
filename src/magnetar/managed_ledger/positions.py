"""Position arithmetic over a managed ledger's list of ledgers.

Theory of operation: a managed ledger's entries are the concatenation of its
ledgers' entries, in ledger-id order (BookKeeper allocates increasing ids, and
a managed ledger only ever appends a newly created ledger).  A
:class:`LedgerList` knows each ledger's entry count -- fixed for closed
ledgers, growing for the current one -- and answers the questions cursors
ask: the next existing position at or after ``p`` (skipping empty and deleted
ledgers), the one before it, how many entries lie between two positions, and
the position ``n`` entries further on (for binary searches by publish time).

Ledger lists are short (tens to thousands of ledgers), so these are loops or
bisects over the list; no per-entry work.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from magnetar.managed_ledger.api import LedgerInfo, Position


class LedgerList:
    __slots__ = ("_ids", "_infos", "current_id", "current_entries", "current_size", "last_confirmed")

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._infos: dict[int, LedgerInfo] = {}
        self.current_id = -1  # the ledger being written; -1 when none
        self.current_entries = 0
        self.current_size = 0
        self.last_confirmed = Position(-1, -1)

    # -- the list ---------------------------------------------------------------------------

    def set(self, info: LedgerInfo) -> None:
        if info.ledger_id not in self._infos:
            i = bisect_left(self._ids, info.ledger_id)
            self._ids.insert(i, info.ledger_id)
        self._infos[info.ledger_id] = info

    def remove(self, ledger_id: int) -> None:
        if self._infos.pop(ledger_id, None) is not None:
            self._ids.remove(ledger_id)

    def get(self, ledger_id: int) -> LedgerInfo | None:
        return self._infos.get(ledger_id)

    def __contains__(self, ledger_id: int) -> bool:
        return ledger_id in self._infos

    def ids(self) -> list[int]:
        return list(self._ids)

    def infos(self) -> list[LedgerInfo]:
        return [self._infos[i] for i in self._ids]

    def __len__(self) -> int:
        return len(self._ids)

    def entries_of(self, ledger_id: int) -> int:
        if ledger_id == self.current_id:
            return self.current_entries
        info = self._infos.get(ledger_id)
        return 0 if info is None else info.entries

    def size_of(self, ledger_id: int) -> int:
        if ledger_id == self.current_id:
            return self.current_size
        info = self._infos.get(ledger_id)
        return 0 if info is None else info.size_bytes

    def total_entries(self) -> int:
        return sum(self.entries_of(i) for i in self._ids)

    def total_size(self) -> int:
        return sum(self.size_of(i) for i in self._ids)

    # -- positions ----------------------------------------------------------------------------

    def first_position(self) -> Position:
        """The first existing entry, or the position after the last confirmed one."""
        return self.next_valid(Position(-1, -1))

    def next_valid(self, pos: Position) -> Position:
        """The first existing position >= ``pos`` (LAC.next() when there is none)."""
        ids = self._ids
        lid = pos.ledger_id
        i = bisect_left(ids, lid)
        if i < len(ids) and ids[i] == lid:
            lac = self.last_confirmed
            if pos.entry_id < self.entries_of(lid) or (lid == lac.ledger_id and pos.entry_id <= lac.entry_id):
                # (a confirmed entry exists, whatever the count says: never step over one)
                return pos if pos.entry_id >= 0 else Position(lid, 0)
            i += 1
        for k in range(i, len(ids)):
            if self.entries_of(ids[k]) > 0:
                return Position(ids[k], 0)
        return self.last_confirmed.next()

    def previous(self, pos: Position) -> Position:
        """The existing position just before ``pos`` ((first ledger, -1) before the first entry)."""
        if pos.entry_id > 0 and pos.ledger_id in self._infos:
            return Position(pos.ledger_id, pos.entry_id - 1)
        ids = self._ids
        i = bisect_left(ids, pos.ledger_id) - 1
        while i >= 0:
            n = self.entries_of(ids[i])
            if n > 0:
                return Position(ids[i], n - 1)
            i -= 1
        return Position(ids[0], -1) if ids else Position(pos.ledger_id, -1)

    def count_between(self, after: Position, upto: Position) -> int:
        """Existing entries p with after < p <= upto."""
        if upto <= after:
            return 0
        ids = self._ids
        total = 0
        for k in range(bisect_left(ids, after.ledger_id), bisect_right(ids, upto.ledger_id)):
            lid = ids[k]
            n = self.entries_of(lid)
            lo = after.entry_id + 1 if lid == after.ledger_id else 0
            hi = upto.entry_id if lid == upto.ledger_id else n - 1
            hi = min(hi, n - 1)
            if hi >= lo:
                total += hi - lo + 1
        return total

    def messages_between(self, after: Position, upto: Position, counts) -> int:  # noqa: ANN001
        """Messages (per :class:`~magnetar.managed_ledger.counts.MessageCounts`) in entries
        p with after < p <= upto."""
        if upto <= after:
            return 0
        ids = self._ids
        total = 0
        for k in range(bisect_left(ids, after.ledger_id), bisect_right(ids, upto.ledger_id)):
            lid = ids[k]
            n = self.entries_of(lid)
            lo = after.entry_id + 1 if lid == after.ledger_id else 0
            hi = min(upto.entry_id if lid == upto.ledger_id else n - 1, n - 1)
            if hi >= lo:
                total += counts.messages_in(lid, lo, hi)
        return total

    def bytes_between(self, after: Position, upto: Position, counts) -> int:  # noqa: ANN001
        """Bytes of the entries p with after < p <= upto: exact where
        :class:`~magnetar.managed_ledger.counts.MessageCounts` knows the entry sizes, the
        ledger's average entry size for the others."""
        if upto <= after:
            return 0
        ids = self._ids
        total = 0
        for k in range(bisect_left(ids, after.ledger_id), bisect_right(ids, upto.ledger_id)):
            lid = ids[k]
            n = self.entries_of(lid)
            lo = after.entry_id + 1 if lid == after.ledger_id else 0
            hi = min(upto.entry_id if lid == upto.ledger_id else n - 1, n - 1)
            if hi >= lo:
                known, unknown = counts.known_bytes(lid, lo, hi)
                total += known + (self.size_of(lid) * unknown // n if unknown and n else 0)
        return total

    def size_after(self, pos: Position) -> int:
        """Estimated bytes of the entries after ``pos`` (Pulsar's estimated backlog size):
        whole ledgers after it, plus the average-size share of its own ledger."""
        total = 0
        for lid in self._ids[bisect_left(self._ids, pos.ledger_id) :]:
            size = self.size_of(lid)
            if lid == pos.ledger_id:
                n = self.entries_of(lid)
                left = n - 1 - pos.entry_id
                if n > 0 and left > 0:
                    total += size * left // n
            else:
                total += size
        return total

    def advance(self, pos: Position, n: int) -> Position:
        """The existing position ``n`` entries after the existing position ``pos``
        (LAC.next() if that runs past the end)."""
        pos = self.next_valid(pos)
        ids = self._ids
        k = bisect_left(ids, pos.ledger_id)
        entry = pos.entry_id
        while k < len(ids):
            left = self.entries_of(ids[k]) - entry
            if n < left:
                return Position(ids[k], entry + n)
            n -= max(left, 0)
            k += 1
            entry = 0
        return self.last_confirmed.next()
