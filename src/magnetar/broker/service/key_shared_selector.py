"""Key_Shared consumer selectors: which consumer owns a sticky-key slot.

Theory of operation
-------------------
A Key_Shared subscription routes each entry by the slot of its sticky key
(:func:`magnetar.protocol.payload.sticky_key` then :func:`magnetar.common.murmur3.sticky_key_slot`,
a number in ``[1, 65535]``).  A *selector* maps slots to consumers; three
kinds, as in Pulsar:

* :class:`ConsistentHashingSelector` (AUTO_SPLIT, the default,
  ``subscriptionKeySharedUseConsistentHashing=true``): every consumer puts
  ``points`` (100) points on a ring at ``pulsar_hash(name + "\\0" + i) %
  65536``; a slot belongs to the first point at or after it, wrapping
  around.  A joining or leaving consumer moves only the slots next to its own
  points.  Colliding points go to the consumer that was there first.
* :class:`SplitRangeSelector` (AUTO_SPLIT, legacy): the first consumer owns
  every slot; each newcomer takes the lower half of the largest range.  A
  leaving consumer's range goes to the range above it (or, for the top
  range, the one below).
* :class:`StickyRangeSelector` (STICKY): each consumer declares inclusive
  ranges; an overlap with a connected consumer, or a range outside
  ``[0, 65535]``, is refused with ConsumerAssignError.  A slot no range
  covers has no owner (its entries wait).

Selectors are pure data structures (no I/O, no clock); the dispatcher asks
:meth:`select` per entry and :meth:`ranges` for stats.  Consumers are any
hashable objects with ``consumer_name`` (and ``key_shared_ranges`` for STICKY).
"""

from __future__ import annotations

import bisect
from typing import Any, Protocol

from magnetar.broker import errors
from magnetar.common.murmur3 import KEY_SHARED_RANGE_SIZE, pulsar_hash, sticky_key_slot
from magnetar.protocol.payload import sticky_key

__all__ = [
    "ConsistentHashingSelector",
    "Selector",
    "SplitRangeSelector",
    "StickyRangeSelector",
    "slot_of_metadata",
]

DEFAULT_POINTS_PER_CONSUMER = 100
MAX_SLOT = KEY_SHARED_RANGE_SIZE - 1


def slot_of_metadata(metadata: Any) -> int:
    return sticky_key_slot(sticky_key(metadata))


class Selector(Protocol):
    def add_consumer(self, consumer: Any) -> None: ...
    def remove_consumer(self, consumer: Any) -> None: ...
    def select(self, slot: int) -> Any | None: ...
    def ranges(self) -> dict[Any, list[tuple[int, int]]]: ...


class ConsistentHashingSelector:
    def __init__(self, points: int = DEFAULT_POINTS_PER_CONSUMER) -> None:
        self._points = max(1, points)
        self._ring: list[int] = []  # sorted point hashes
        self._owners: dict[int, list[Any]] = {}  # point -> consumers placed there, first wins
        self._consumer_points: dict[Any, list[int]] = {}

    def add_consumer(self, consumer: Any) -> None:
        if consumer in self._consumer_points:
            return
        name = consumer.consumer_name or ""
        pts = []
        for i in range(self._points):
            h = pulsar_hash(f"{name}\0{i}".encode()) % KEY_SHARED_RANGE_SIZE
            owners = self._owners.get(h)
            if owners is None:
                self._owners[h] = [consumer]
                bisect.insort(self._ring, h)
            else:
                owners.append(consumer)
            pts.append(h)
        self._consumer_points[consumer] = pts

    def remove_consumer(self, consumer: Any) -> None:
        pts = self._consumer_points.pop(consumer, None)
        if pts is None:
            return
        for h in pts:
            owners = self._owners.get(h)
            if owners is None:
                continue
            if consumer in owners:
                owners.remove(consumer)
            if not owners:
                del self._owners[h]
                i = bisect.bisect_left(self._ring, h)
                if i < len(self._ring) and self._ring[i] == h:
                    self._ring.pop(i)

    def select(self, slot: int) -> Any | None:
        if not self._ring:
            return None
        i = bisect.bisect_left(self._ring, slot)
        if i == len(self._ring):
            i = 0
        return self._owners[self._ring[i]][0]

    def ranges(self) -> dict[Any, list[tuple[int, int]]]:
        out: dict[Any, list[tuple[int, int]]] = {}
        ring = self._ring
        for idx, point in enumerate(ring):
            owner = self._owners[point][0]
            start = ring[idx - 1] + 1 if idx > 0 else 0
            if start <= point:
                out.setdefault(owner, []).append((start, point))
        if ring and ring[-1] < MAX_SLOT:
            out.setdefault(self._owners[ring[0]][0], []).append((ring[-1] + 1, MAX_SLOT))
        for v in out.values():
            v.sort()
        return out


class SplitRangeSelector:
    """Legacy auto-split: ranges keyed by their (inclusive) end slot."""

    def __init__(self) -> None:
        self._ends: list[int] = []  # sorted range ends
        self._owner: dict[int, Any] = {}

    def add_consumer(self, consumer: Any) -> None:
        if consumer in self._owner.values():
            return
        if not self._ends:
            self._ends = [MAX_SLOT]
            self._owner[MAX_SLOT] = consumer
            return
        best_start, best_end, prev = 0, self._ends[0], -1
        for end in self._ends:
            if end - prev > best_end - best_start + 1:
                best_start, best_end = prev + 1, end
            prev = end
        if best_end == best_start:
            raise errors.ConsumerAssignError("No range left to split for a new Key_Shared consumer")
        middle = best_start + (best_end - best_start) // 2
        bisect.insort(self._ends, middle)
        self._owner[middle] = consumer

    def remove_consumer(self, consumer: Any) -> None:
        for end in [e for e, c in self._owner.items() if c is consumer]:
            i = self._ends.index(end)
            del self._owner[end]
            self._ends.pop(i)
            if i == len(self._ends) and self._ends:
                # The top range: the one below grows to the top.
                lower = self._ends.pop()
                self._owner[MAX_SLOT] = self._owner.pop(lower)
                self._ends.append(MAX_SLOT)

    def select(self, slot: int) -> Any | None:
        i = bisect.bisect_left(self._ends, slot)
        if i == len(self._ends):
            return None
        return self._owner[self._ends[i]]

    def ranges(self) -> dict[Any, list[tuple[int, int]]]:
        out: dict[Any, list[tuple[int, int]]] = {}
        prev = -1
        for end in self._ends:
            out.setdefault(self._owner[end], []).append((prev + 1, end))
            prev = end
        return out


class StickyRangeSelector:
    """Declared ranges (inclusive); overlaps refused."""

    def __init__(self) -> None:
        self._starts: list[int] = []  # sorted, non-overlapping
        self._range: dict[int, tuple[int, Any]] = {}  # start -> (end, consumer)

    def add_consumer(self, consumer: Any) -> None:
        declared = sorted(getattr(consumer, "key_shared_ranges", None) or [])
        if not declared:
            raise errors.ConsumerAssignError("A STICKY Key_Shared consumer must declare hash ranges")
        for start, end in declared:
            if start < 0 or end > MAX_SLOT or start > end:
                raise errors.ConsumerAssignError(
                    f"Invalid range [{start}, {end}]: must lie in [0, {MAX_SLOT}]"
                )
        for (s1, e1), (s2, _e2) in zip(declared, declared[1:], strict=False):
            if s2 <= e1:
                raise errors.ConsumerAssignError(
                    f"Ranges [{s1}, {e1}] and [{s2}, ...] of one consumer overlap"
                )
        for start, end in declared:
            hit = self._overlapping(start, end)
            if hit is not None:
                (hs, he, other) = hit
                raise errors.ConsumerAssignError(
                    f"Range [{start}, {end}] overlaps [{hs}, {he}] of consumer {other.consumer_name!r}"
                )
        for start, end in declared:
            bisect.insort(self._starts, start)
            self._range[start] = (end, consumer)

    def _overlapping(self, start: int, end: int) -> tuple[int, int, Any] | None:
        i = bisect.bisect_right(self._starts, end)
        if i == 0:
            return None
        s = self._starts[i - 1]
        e, c = self._range[s]
        return (s, e, c) if e >= start else None

    def remove_consumer(self, consumer: Any) -> None:
        for s in [s for s, (_e, c) in self._range.items() if c is consumer]:
            del self._range[s]
            self._starts.remove(s)

    def select(self, slot: int) -> Any | None:
        i = bisect.bisect_right(self._starts, slot)
        if i == 0:
            return None
        end, consumer = self._range[self._starts[i - 1]]
        return consumer if slot <= end else None

    def ranges(self) -> dict[Any, list[tuple[int, int]]]:
        out: dict[Any, list[tuple[int, int]]] = {}
        for s in self._starts:
            e, c = self._range[s]
            out.setdefault(c, []).append((s, e))
        return out
