"""Range sets: the acknowledgement holes of a cursor.

Theory of operation
-------------------
A cursor remembers, beyond its mark-delete position, every entry acked out of
order: Pulsar's ``individuallyDeletedMessages``.  With a million alternating
acks that is a million ranges, so the structure must add in O(log n), hold a
million ranges in a few tens of megabytes, and drop everything up to a
position cheaply when the mark-delete moves.

:class:`RangeSet` stores *closed* ranges ``[start, end]`` of comparable keys,
disjoint and never adjacent: two ranges are merged as soon as one's end has
the other's start as its ``successor``.  The successor function is injected
(``k + 1`` for ints), so the same code serves any discrete ordered key.  The
ranges live in chunks of at most ``chunk_size`` (a sorted list of sorted
lists, the shape of ``sortedcontainers``): a bisect over the chunks' first
starts, then a bisect inside one chunk; an insert moves at most one chunk.
Chunk containers come from a factory, so int keys use ``array('q')`` (8 bytes
a key instead of a boxed int and a pointer).

Because the ranges are disjoint, both starts and ends are sorted, and the
range touching a key ``k`` is always the last one whose start is ``<= k`` or
``<= successor(k)``: every operation is two bisects and a splice.

:class:`PositionRangeSet` holds ``(ledger_id, entry_id)`` positions the way
Pulsar's default open-cache range set does: one int range set per ledger, so
a range never spans two ledgers (entry ids of different ledgers are not
adjacent; the managed ledger, which knows where ledgers end, moves the
mark-delete across ledger boundaries itself).  ``str()`` prints Pulsar's
admin format, open-closed ranges ``[(3:4..3:7], (3:9..3:10]]``.

Serialization is a plain list of closed ``(start, end)`` pairs, optionally
capped to the first N ranges (Pulsar persists at most
``managedLedgerMaxUnackedRangesToPersist`` ranges).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from typing import Any, Generic, TypeVar

K = TypeVar("K")

DEFAULT_CHUNK_SIZE = 512


def _int_successor(k: Any) -> Any:
    return k + 1


def _int_span(lo: Any, hi: Any) -> int:
    return hi - lo + 1


def _int_array() -> MutableSequence[Any]:
    return array("q")


class RangeSet(Generic[K]):
    """Disjoint, non-adjacent closed ranges of discrete keys, kept sorted.

    ``successor(k)`` gives the next key after ``k``; ``span(lo, hi)`` the
    number of keys in ``[lo, hi]`` (needed only for :meth:`count`);
    ``storage`` builds an empty chunk container (``list`` by default).
    """

    __slots__ = ("_succ", "_span", "_new", "_chunk_size", "_starts", "_ends", "_firsts", "_n", "_size")

    def __init__(
        self,
        successor: Callable[[K], K] | None = None,
        *,
        span: Callable[[K, K], int] | None = None,
        storage: Callable[[], MutableSequence[Any]] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        if chunk_size < 2:
            raise ValueError("chunk_size must be >= 2")
        self._succ: Callable[[K], K] = successor or _int_successor
        self._span = span if span is not None else (_int_span if successor is None else None)
        self._new: Callable[[], MutableSequence[Any]] = storage or list
        self._chunk_size = chunk_size
        self._starts: list[MutableSequence[Any]] = []
        self._ends: list[MutableSequence[Any]] = []
        self._firsts: list[K] = []
        self._n = 0
        self._size = 0

    @classmethod
    def of_ints(cls, chunk_size: int = DEFAULT_CHUNK_SIZE) -> RangeSet[int]:
        """An int range set stored in ``array('q')`` chunks (keys within int64)."""
        return RangeSet(storage=_int_array, chunk_size=chunk_size)  # type: ignore[return-value]

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        """Number of ranges."""
        return self._n

    def range_count(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def count(self) -> int:
        """Number of keys in all ranges (needs a ``span`` function)."""
        if self._span is None:
            raise TypeError("this RangeSet has no span function; count() is unknown")
        return self._size

    def __iter__(self) -> Iterator[tuple[K, K]]:
        for starts, ends in zip(self._starts, self._ends, strict=True):
            yield from zip(starts, ends, strict=True)

    def __contains__(self, key: object) -> bool:
        return self.contains(key)  # type: ignore[arg-type]

    def contains(self, key: K) -> bool:
        p = self._find(key)
        return p is not None and self._ends[p[0]][p[1]] >= key

    def range_containing(self, key: K) -> tuple[K, K] | None:
        p = self._find(key)
        if p is None or self._ends[p[0]][p[1]] < key:
            return None
        return self._starts[p[0]][p[1]], self._ends[p[0]][p[1]]

    def first_range(self) -> tuple[K, K] | None:
        if not self._n:
            return None
        return self._starts[0][0], self._ends[0][0]

    def last_range(self) -> tuple[K, K] | None:
        if not self._n:
            return None
        return self._starts[-1][-1], self._ends[-1][-1]

    def to_pairs(self, max_ranges: int | None = None) -> list[tuple[K, K]]:
        """The first ``max_ranges`` (all if None) closed ranges as ``(start, end)`` pairs."""
        out: list[tuple[K, K]] = []
        for pair in self:
            if max_ranges is not None and len(out) >= max_ranges:
                break
            out.append(pair)
        return out

    def add_pairs(self, pairs: Iterable[tuple[K, K]]) -> None:
        for lo, hi in pairs:
            self.add_range(lo, hi)

    def __repr__(self) -> str:
        shown = ", ".join(f"[{lo}, {hi}]" for lo, hi in self.to_pairs(8))
        more = ", ..." if self._n > 8 else ""
        return f"RangeSet({shown}{more})"

    # ---------------------------------------------------------------- mutation

    def add(self, key: K) -> None:
        self.add_range(key, key)

    def add_range(self, lo: K, hi: K) -> None:
        """Add the closed range ``[lo, hi]``, merging with what it overlaps or touches."""
        if hi < lo:  # type: ignore[operator]
            raise ValueError(f"empty range [{lo}, {hi}]")
        if not self._n:
            self._new_chunk_at(0, lo, hi)
            return
        # Fast path: at or after the end (acks mostly arrive in order).
        last_end = self._ends[-1][-1]
        if lo > last_end:
            if self._succ(last_end) == lo:
                self._set_end(len(self._ends) - 1, len(self._ends[-1]) - 1, hi)
            else:
                self._insert(len(self._starts) - 1, len(self._starts[-1]), lo, hi)
            return
        first = self._first_touching(lo)
        last = self._find(self._succ(hi))
        if last is None or first > last:
            self._insert(first[0], first[1], lo, hi)
            return
        new_lo = min(lo, self._starts[first[0]][first[1]])  # type: ignore[type-var]
        new_hi = max(hi, self._ends[last[0]][last[1]])  # type: ignore[type-var]
        self._replace_span(first, last, new_lo, new_hi)

    def remove_up_to(self, key: K) -> None:
        """Remove every key ``<= key`` (the mark-delete position moved to ``key``)."""
        p = self._find(key)
        if p is None:
            return
        ci, off = p
        end = self._ends[ci][off]
        if self._span is not None:
            for c in range(ci):
                for s, e in zip(self._starts[c], self._ends[c], strict=True):
                    self._size -= self._span(s, e)
            for s, e in zip(self._starts[ci][:off], self._ends[ci][:off], strict=True):
                self._size -= self._span(s, e)
        removed = sum(len(c) for c in self._starts[:ci]) + off
        del self._starts[:ci], self._ends[:ci], self._firsts[:ci]
        starts, ends = self._starts[0], self._ends[0]
        del starts[:off], ends[:off]
        self._n -= removed
        if end <= key:  # the range is wholly covered: drop it
            if self._span is not None:
                self._size -= self._span(starts[0], end)
            del starts[0], ends[0]
            self._n -= 1
        else:  # cut its head
            new_start = self._succ(key)
            if self._span is not None:
                self._size -= self._span(starts[0], end) - self._span(new_start, end)
            starts[0] = new_start
        if not starts:
            del self._starts[0], self._ends[0], self._firsts[0]
        else:
            self._firsts[0] = starts[0]

    def clear(self) -> None:
        self._starts.clear()
        self._ends.clear()
        self._firsts.clear()
        self._n = 0
        self._size = 0

    # ----------------------------------------------------------------- helpers

    def _find(self, key: K) -> tuple[int, int] | None:
        """(chunk, offset) of the last range whose start is <= key, or None."""
        ci = bisect_right(self._firsts, key) - 1  # type: ignore[type-var]
        if ci < 0:
            return None
        return ci, bisect_right(self._starts[ci], key) - 1  # type: ignore[arg-type]

    def _first_touching(self, lo: K) -> tuple[int, int]:
        """Position of the first range that overlaps ``[lo, ...]`` or ends just before ``lo``."""
        p = self._find(lo)
        if p is None:
            return 0, 0
        end = self._ends[p[0]][p[1]]
        if end >= lo or self._succ(end) == lo:
            return p
        ci, off = p
        if off + 1 < len(self._starts[ci]) or ci + 1 == len(self._starts):
            return ci, off + 1
        return ci + 1, 0

    def _set_end(self, ci: int, off: int, hi: K) -> None:
        if self._span is not None:
            s = self._starts[ci][off]
            self._size += self._span(s, hi) - self._span(s, self._ends[ci][off])
        self._ends[ci][off] = hi

    def _new_chunk_at(self, ci: int, lo: K, hi: K) -> None:
        starts, ends = self._new(), self._new()
        starts.append(lo)
        ends.append(hi)
        self._starts.insert(ci, starts)
        self._ends.insert(ci, ends)
        self._firsts.insert(ci, lo)
        self._n += 1
        if self._span is not None:
            self._size += self._span(lo, hi)

    def _insert(self, ci: int, off: int, lo: K, hi: K) -> None:
        self._starts[ci].insert(off, lo)
        self._ends[ci].insert(off, hi)
        if off == 0:
            self._firsts[ci] = lo
        self._n += 1
        if self._span is not None:
            self._size += self._span(lo, hi)
        if len(self._starts[ci]) > self._chunk_size:
            self._split(ci)

    def _split(self, ci: int) -> None:
        half = len(self._starts[ci]) // 2
        starts, ends = self._starts[ci], self._ends[ci]
        tail_s, tail_e = self._new(), self._new()
        tail_s.extend(starts[half:])
        tail_e.extend(ends[half:])
        del starts[half:], ends[half:]
        self._starts.insert(ci + 1, tail_s)
        self._ends.insert(ci + 1, tail_e)
        self._firsts.insert(ci + 1, tail_s[0])

    def _replace_span(self, first: tuple[int, int], last: tuple[int, int], lo: K, hi: K) -> None:
        """Replace ranges first..last (inclusive) with the single range [lo, hi]."""
        (a, ao), (b, bo) = first, last
        if self._span is not None:
            for s, e in self._iter_span(first, last):
                self._size -= self._span(s, e)
            self._size += self._span(lo, hi)
        if a == b:
            removed = bo - ao + 1
            del self._starts[a][ao + 1 : bo + 1], self._ends[a][ao + 1 : bo + 1]
            self._starts[a][ao] = lo
            self._ends[a][ao] = hi
        else:
            removed = (len(self._starts[a]) - ao) + sum(len(c) for c in self._starts[a + 1 : b]) + bo + 1
            del self._starts[a][ao:], self._ends[a][ao:]
            self._starts[a].append(lo)
            self._ends[a].append(hi)
            del self._starts[b][: bo + 1], self._ends[b][: bo + 1]
            del self._starts[a + 1 : b], self._ends[a + 1 : b], self._firsts[a + 1 : b]
            if not self._starts[a + 1]:
                del self._starts[a + 1], self._ends[a + 1], self._firsts[a + 1]
            else:
                self._firsts[a + 1] = self._starts[a + 1][0]
        self._firsts[a] = self._starts[a][0]
        self._n -= removed - 1

    def _iter_span(self, first: tuple[int, int], last: tuple[int, int]) -> Iterator[tuple[K, K]]:
        (a, ao), (b, bo) = first, last
        for c in range(a, b + 1):
            lo_off = ao if c == a else 0
            hi_off = bo + 1 if c == b else len(self._starts[c])
            yield from zip(self._starts[c][lo_off:hi_off], self._ends[c][lo_off:hi_off], strict=True)


Position = tuple[int, int]
"""A managed-ledger position: ``(ledger_id, entry_id)``."""


class PositionRangeSet:
    """Acked ranges of ``(ledger_id, entry_id)`` positions, one int range set per ledger.

    A range never spans two ledgers; :meth:`add_range` refuses one that would.
    """

    __slots__ = ("_ledgers", "_sets", "_chunk_size", "_n", "_size")

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self._ledgers: list[int] = []  # sorted ledger ids that have ranges
        self._sets: dict[int, RangeSet[int]] = {}
        self._chunk_size = chunk_size
        self._n = 0
        self._size = 0

    def __len__(self) -> int:
        return self._n

    def range_count(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def count(self) -> int:
        """Number of positions in all ranges."""
        return self._size

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        for ledger in self._ledgers:
            for lo, hi in self._sets[ledger]:
                yield (ledger, lo), (ledger, hi)

    def __contains__(self, position: object) -> bool:
        return self.contains(position)  # type: ignore[arg-type]

    def contains(self, position: Position) -> bool:
        rs = self._sets.get(position[0])
        return rs is not None and rs.contains(position[1])

    def range_containing(self, position: Position) -> tuple[Position, Position] | None:
        rs = self._sets.get(position[0])
        r = rs.range_containing(position[1]) if rs is not None else None
        return None if r is None else ((position[0], r[0]), (position[0], r[1]))

    def first_range(self) -> tuple[Position, Position] | None:
        if not self._n:
            return None
        ledger = self._ledgers[0]
        lo, hi = self._sets[ledger].first_range()  # type: ignore[misc]
        return (ledger, lo), (ledger, hi)

    def last_range(self) -> tuple[Position, Position] | None:
        if not self._n:
            return None
        ledger = self._ledgers[-1]
        lo, hi = self._sets[ledger].last_range()  # type: ignore[misc]
        return (ledger, lo), (ledger, hi)

    def add(self, position: Position) -> None:
        self.add_range(position, position)

    def add_range(self, lo: Position, hi: Position) -> None:
        """Add the closed range ``[lo, hi]``; both ends must be in the same ledger."""
        if lo[0] != hi[0]:
            raise ValueError(f"range {lo}..{hi} spans ledgers; add one range per ledger")
        if hi[1] < lo[1]:
            raise ValueError(f"empty range [{lo}, {hi}]")
        ledger = lo[0]
        rs = self._sets.get(ledger)
        if rs is None:
            rs = self._sets[ledger] = RangeSet.of_ints(self._chunk_size)
            i = bisect_right(self._ledgers, ledger)
            self._ledgers.insert(i, ledger)
        n0, s0 = len(rs), rs.count()
        rs.add_range(lo[1], hi[1])
        self._n += len(rs) - n0
        self._size += rs.count() - s0

    def remove_up_to(self, position: Position) -> None:
        """Remove every position ``<= position`` (the mark-delete moved there)."""
        ledger, entry = position
        cut = bisect_right(self._ledgers, ledger)
        # Ledgers strictly below go entirely; the position's own ledger is trimmed.
        drop = self._ledgers[: cut - 1] if cut and self._ledgers[cut - 1] == ledger else self._ledgers[:cut]
        for lid in drop:
            rs = self._sets.pop(lid)
            self._n -= len(rs)
            self._size -= rs.count()
        del self._ledgers[: len(drop)]
        rs = self._sets.get(ledger)
        if rs is not None:
            n0, s0 = len(rs), rs.count()
            rs.remove_up_to(entry)
            self._n += len(rs) - n0
            self._size += rs.count() - s0
            if not rs:
                del self._sets[ledger]
                self._ledgers.remove(ledger)

    def clear(self) -> None:
        self._ledgers.clear()
        self._sets.clear()
        self._n = 0
        self._size = 0

    def to_pairs(self, max_ranges: int | None = None) -> list[tuple[Position, Position]]:
        """The first ``max_ranges`` (all if None) closed ranges, in position order."""
        out: list[tuple[Position, Position]] = []
        for pair in self:
            if max_ranges is not None and len(out) >= max_ranges:
                break
            out.append(pair)
        return out

    def add_pairs(self, pairs: Iterable[tuple[Position, Position]]) -> None:
        for lo, hi in pairs:
            self.add_range(lo, hi)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[Position, Position]]) -> PositionRangeSet:
        rs = cls()
        rs.add_pairs(pairs)
        return rs

    def to_string(self, max_ranges: int | None = None) -> str:
        """Pulsar's admin form: open-closed ranges ``[(3:4..3:7], (3:9..3:10]]``.

        The open lower end is the entry before the range's first entry, so a
        range starting at entry 0 prints as ``(3:-1..3:0]``.
        """
        parts = [f"({lo[0]}:{lo[1] - 1}..{hi[0]}:{hi[1]}]" for lo, hi in self.to_pairs(max_ranges)]
        return "[" + ", ".join(parts) + "]"

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        more = "..." if self._n > 8 else ""
        return f"PositionRangeSet({self.to_string(8)}{more})"
