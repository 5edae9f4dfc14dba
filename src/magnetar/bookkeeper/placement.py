"""Ensemble placement: which bookies store a ledger.

Theory of operation: a :class:`BookieRegistry` knows the writable bookies
(children of ``AVAILABLE_PATH`` minus those under ``READONLY_PATH``) and each
bookie's rack (the value of ``RACKS_PATH/<bookie>``; none means
``/default-rack``).  It caches both and re-reads them when the metadata store
notifies a change under those paths, or after ``refresh_ms`` at the latest.

The registry also remembers bookies that recently failed a write
(``mark_failed``); they stay *quarantined* for ``quarantine_ms`` and are not
chosen as replacements, and new ensembles use them only when nothing else
is left.

A placement policy turns that into an ensemble.  Both policies draw from the
injected :class:`~magnetar.runtime.Rng` over a *sorted* candidate list, so a
seed reproduces placements exactly:

* :class:`DefaultPlacementPolicy` -- E random healthy bookies.
* :class:`RegionAwarePlacementPolicy` -- the same rules over regions
  (the first level of a ``/region/rack`` name).
* :class:`RackAwarePlacementPolicy` -- fills positions 0..E-1 so that every
  write set (Qw consecutive positions, wrapping around) has bookies on
  distinct racks when there are enough racks, preferring the racks with the
  most unused bookies; when it cannot, it degrades to the fewest collisions.

``replace_bookie`` picks one bookie for position ``index`` of an existing
ensemble (ensemble change, re-replication) under the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from magnetar.bookie.api import AVAILABLE_PATH, RACKS_PATH, READONLY_PATH
from magnetar.bookkeeper.api import NotEnoughBookiesError
from magnetar.metadata.api import MetadataStore, Notification
from magnetar.runtime import Clock, Rng

DEFAULT_RACK = "/default-rack"
_READONLY_CHILD = READONLY_PATH.rsplit("/", 1)[1]


class PlacementPolicy(Protocol):
    def new_ensemble(
        self,
        size: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> tuple[str, ...]: ...

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> str: ...


def _candidates(bookies: Sequence[str], exclude: set[str]) -> list[str]:
    return sorted(b for b in bookies if b not in exclude)


def _ensemble_candidates(size: int, bookies: Sequence[str], exclude: set[str]) -> list[str]:
    """The bookies a new ensemble of ``size`` may use; NotEnoughBookiesError if too few."""
    cands = _candidates(bookies, exclude)
    if len(cands) < size:
        raise NotEnoughBookiesError(f"need {size} bookies, {len(cands)} available")
    return cands


def _replacement_candidates(
    ensemble: Sequence[str], index: int, bookies: Sequence[str], exclude: set[str]
) -> list[str]:
    """The bookies that may replace ``ensemble[index]`` (none already in the ensemble)."""
    cands = _candidates(bookies, exclude | set(ensemble))
    if not cands:
        raise NotEnoughBookiesError(f"no bookie available to replace {ensemble[index]}")
    return cands


class DefaultPlacementPolicy:
    def __init__(self, rng: Rng) -> None:
        self._rng = rng

    def new_ensemble(
        self,
        size: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> tuple[str, ...]:
        cands = _ensemble_candidates(size, bookies, exclude)
        return tuple(self._rng.sample(cands, size))

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> str:
        cands = _replacement_candidates(ensemble, index, bookies, exclude)
        return self._rng.choice(cands)


def _neighbours(positions: int, index: int, write_quorum: int) -> list[int]:
    """Positions sharing at least one write set with ``index`` (cyclic), excluding it."""
    span = min(write_quorum - 1, positions - 1)
    out = {(index + d) % positions for d in range(-span, span + 1)}
    out.discard(index)
    return sorted(out)


class RackAwarePlacementPolicy:
    def __init__(self, rng: Rng) -> None:
        self._rng = rng

    def _pick(
        self, cands: list[str], taken_racks: list[str], racks: Mapping[str, str], used: set[str]
    ) -> str:
        # Score: rack collisions with neighbours (lower better), then prefer racks with
        # many unused bookies left (keeps later positions satisfiable), then random.
        remaining: dict[str, int] = {}
        for b in cands:
            if b not in used:
                r = racks.get(b, DEFAULT_RACK)
                remaining[r] = remaining.get(r, 0) + 1
        best: list[str] = []
        best_key: tuple[int, int] | None = None
        for b in cands:
            if b in used:
                continue
            r = racks.get(b, DEFAULT_RACK)
            key = (taken_racks.count(r), -remaining[r])
            if best_key is None or key < best_key:
                best, best_key = [b], key
            elif key == best_key:
                best.append(b)
        if not best:
            raise NotEnoughBookiesError("not enough bookies for a rack-aware ensemble")
        return self._rng.choice(best)

    def new_ensemble(
        self,
        size: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> tuple[str, ...]:
        cands = _ensemble_candidates(size, bookies, exclude)
        chosen: list[str | None] = [None] * size
        used: set[str] = set()
        for i in range(size):
            taken = [
                racks.get(b, DEFAULT_RACK)
                for j in _neighbours(size, i, write_quorum)
                if (b := chosen[j]) is not None
            ]
            pick = self._pick(cands, taken, racks, used)
            chosen[i] = pick
            used.add(pick)
        return tuple(b for b in chosen if b is not None)

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> str:
        cands = _replacement_candidates(ensemble, index, bookies, exclude)
        taken = [
            racks.get(ensemble[j], DEFAULT_RACK) for j in _neighbours(len(ensemble), index, write_quorum)
        ]
        return self._pick(cands, taken, racks, set())


DEFAULT_REGION = "/default-region"


def region_of(rack: str) -> str:
    """``/region/rack`` -> ``/region`` (Pulsar's rack-info form); a one-level name is its own region."""
    parts = [p for p in rack.split("/") if p]
    if len(parts) < 2 or rack == DEFAULT_RACK:
        return DEFAULT_REGION
    return "/" + parts[0]


class RegionAwarePlacementPolicy(RackAwarePlacementPolicy):
    """The rack-aware rules applied to regions: each write set spans as many regions as exist.

    Bookies' racks are named ``/region/rack``; a bookie with no rack (or a one-level rack)
    is in ``/default-region``.  Within a region the choice is random, as in the default policy.
    """

    def new_ensemble(
        self,
        size: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> tuple[str, ...]:
        return super().new_ensemble(size, write_quorum, bookies, _regions(bookies, racks), exclude)

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[str],
        racks: Mapping[str, str],
        exclude: set[str],
    ) -> str:
        regions = _regions([*bookies, *ensemble], racks)
        return super().replace_bookie(ensemble, index, write_quorum, bookies, regions, exclude)


def _regions(bookies: Sequence[str], racks: Mapping[str, str]) -> dict[str, str]:
    return {b: region_of(racks.get(b, DEFAULT_RACK)) for b in bookies}


PLACEMENT_POLICIES = ("default", "rack_aware", "region_aware")


def make_policy(name: str, rng: Rng) -> PlacementPolicy:
    if name == "rack_aware":
        return RackAwarePlacementPolicy(rng)
    if name == "region_aware":
        return RegionAwarePlacementPolicy(rng)
    return DefaultPlacementPolicy(rng)


class BookieRegistry:
    """Cached view of writable bookies and racks, invalidated by store notifications."""

    def __init__(
        self, store: MetadataStore, clock: Clock, refresh_ms: int = 5_000, quarantine_ms: int = 30_000
    ) -> None:
        self._store = store
        self._clock = clock
        self._refresh_s = refresh_ms / 1000.0
        self._bookies: list[str] | None = None
        self._racks: dict[str, str] | None = None
        self._read_at = 0.0
        self._quarantine_s = quarantine_ms / 1000.0
        self._failed_at: dict[str, float] = {}
        store.add_listener(self._on_notification)

    def mark_failed(self, bookie_id: str) -> None:
        """A write to ``bookie_id`` failed: avoid it as a replacement for a while."""
        self._failed_at[bookie_id] = self._clock.monotonic()

    def quarantined(self) -> set[str]:
        now = self._clock.monotonic()
        for b in [b for b, t in self._failed_at.items() if now - t >= self._quarantine_s]:
            del self._failed_at[b]
        return set(self._failed_at)

    def _on_notification(self, n: Notification) -> None:
        if n.path.startswith(AVAILABLE_PATH):
            self._bookies = None
        elif n.path.startswith(RACKS_PATH):
            self._racks = None

    def invalidate(self) -> None:
        self._bookies = None
        self._racks = None

    def close(self) -> None:
        self._store.remove_listener(self._on_notification)

    def _stale(self) -> bool:
        return self._clock.monotonic() - self._read_at > self._refresh_s

    async def writable_bookies(self) -> list[str]:
        if self._bookies is None or self._stale():
            available = await self._store.children(AVAILABLE_PATH)
            readonly = set(await self._store.children(READONLY_PATH))
            self._bookies = sorted(b for b in available if b != _READONLY_CHILD and b not in readonly)
            self._read_at = self._clock.monotonic()
        return list(self._bookies)

    async def all_bookies(self) -> list[str]:
        """Writable and read-only bookies (both can serve reads)."""
        available = await self._store.children(AVAILABLE_PATH)
        readonly = await self._store.children(READONLY_PATH)
        return sorted({b for b in available if b != _READONLY_CHILD} | set(readonly))

    async def bookie_groups(self) -> dict[str, dict]:
        """The bookie isolation groups document (see :mod:`.isolation`); read on each call:
        only ledgers of isolated namespaces ask, once per ledger creation."""
        from magnetar.bookkeeper.isolation import BOOKIE_GROUPS_PATH, parse_groups_document

        got = await self._store.get(BOOKIE_GROUPS_PATH)
        return parse_groups_document(got.value if got is not None else None)

    async def racks(self) -> dict[str, str]:
        if self._racks is None or self._stale():
            racks: dict[str, str] = {}
            for name in await self._store.children(RACKS_PATH):
                got = await self._store.get(f"{RACKS_PATH}/{name}")
                if got is not None and got.value:
                    racks[name] = got.value.decode()
            self._racks = racks
            self._read_at = self._clock.monotonic()
        return dict(self._racks)
