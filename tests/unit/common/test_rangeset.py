"""RangeSet and PositionRangeSet against a naive set-of-keys model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.common.rangeset import PositionRangeSet, RangeSet


def runs(keys: set[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive ints: the canonical range list of a set."""
    out: list[tuple[int, int]] = []
    for k in sorted(keys):
        if out and out[-1][1] + 1 == k:
            out[-1] = (out[-1][0], k)
        else:
            out.append((k, k))
    return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 200), st.just(0)),
        st.tuples(st.just("range"), st.integers(0, 200), st.integers(0, 12)),
        st.tuples(st.just("cut"), st.integers(-5, 205), st.just(0)),
    ),
    max_size=120,
)


def apply(rs: RangeSet[int], model: set[int], op: tuple[str, int, int]) -> None:
    kind, a, b = op
    if kind == "add":
        rs.add(a)
        model.add(a)
    elif kind == "range":
        rs.add_range(a, a + b)
        model.update(range(a, a + b + 1))
    else:
        rs.remove_up_to(a)
        model.difference_update([k for k in model if k <= a])


@pytest.mark.parametrize("storage", ["list", "array"])
@settings(max_examples=300, deadline=None)
@given(ops=ops, chunk_size=st.integers(2, 6), probes=st.lists(st.integers(-3, 215), max_size=20))
def test_int_rangeset_matches_model(storage: str, ops, chunk_size: int, probes: list[int]) -> None:
    rs: RangeSet[int] = (
        RangeSet.of_ints(chunk_size) if storage == "array" else RangeSet(chunk_size=chunk_size)
    )
    model: set[int] = set()
    for op in ops:
        apply(rs, model, op)
        expected = runs(model)
        assert list(rs) == expected
        assert len(rs) == len(expected)
        assert rs.count() == len(model)
    for p in probes:
        assert rs.contains(p) == (p in model)
        r = rs.range_containing(p)
        assert (r is not None) == (p in model)
        if r is not None:
            assert r[0] <= p <= r[1] and r in runs(model)
    expected = runs(model)
    assert rs.first_range() == (expected[0] if expected else None)
    assert rs.last_range() == (expected[-1] if expected else None)
    assert rs.to_pairs(3) == expected[:3]
    # chunk invariants: no empty chunk, chunk index matches, chunks bounded
    for starts, first in zip(rs._starts, rs._firsts, strict=True):
        assert len(starts) >= 1 and starts[0] == first and len(starts) <= chunk_size


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 40), st.integers(0, 5)), max_size=60), st.data())
def test_position_rangeset_matches_model(adds, data) -> None:
    rs = PositionRangeSet(chunk_size=3)
    model: set[tuple[int, int]] = set()
    for ledger, entry, width in adds:
        rs.add_range((ledger, entry), (ledger, entry + width))
        model.update((ledger, e) for e in range(entry, entry + width + 1))
    cut = data.draw(st.one_of(st.none(), st.tuples(st.integers(0, 5), st.integers(-1, 50))))
    if cut is not None:
        rs.remove_up_to(cut)
        model = {p for p in model if p > cut}
    expected = []
    for ledger in sorted({p[0] for p in model}):
        expected += [((ledger, a), (ledger, b)) for a, b in runs({e for lid, e in model if lid == ledger})]
    assert list(rs) == expected
    assert len(rs) == len(expected)
    assert rs.count() == len(model)
    assert rs.first_range() == (expected[0] if expected else None)
    for p in [(lid, e) for lid in range(0, 6) for e in range(-1, 50, 3)]:
        assert rs.contains(p) == (p in model)
    clone = PositionRangeSet.from_pairs(rs.to_pairs())
    assert list(clone) == list(rs)


def test_position_rangeset_prints_pulsar_form() -> None:
    rs = PositionRangeSet()
    assert str(rs) == "[]"
    for p in [(3, 5), (3, 6), (3, 7), (3, 10), (4, 0)]:
        rs.add(p)
    assert str(rs) == "[(3:4..3:7], (3:9..3:10], (4:-1..4:0]]"
    assert rs.to_string(max_ranges=1) == "[(3:4..3:7]]"


def test_position_range_may_not_span_ledgers() -> None:
    with pytest.raises(ValueError, match="spans ledgers"):
        PositionRangeSet().add_range((1, 5), (2, 0))
    rs = PositionRangeSet()
    with pytest.raises(ValueError, match="empty range"):
        rs.add_range((1, 5), (1, 4))
    assert not rs and rs.first_range() is None and list(rs) == []


def test_rangeset_rejects_empty_range_and_needs_span_for_count() -> None:
    rs: RangeSet[int] = RangeSet()
    with pytest.raises(ValueError):
        rs.add_range(5, 4)
    tuples: RangeSet[tuple[int, int]] = RangeSet(successor=lambda p: (p[0], p[1] + 1))
    tuples.add((1, 1))
    tuples.add((1, 2))
    tuples.add((2, 0))
    assert list(tuples) == [((1, 1), (1, 2)), ((2, 0), (2, 0))]
    with pytest.raises(TypeError):
        tuples.count()


def test_million_alternating_acks_fit() -> None:
    rs = PositionRangeSet()
    for e in range(0, 2_000_000, 2):
        rs.add((7, e))
    assert len(rs) == 1_000_000 and rs.count() == 1_000_000
    rs.add((7, 1))  # fills a hole in the middle: three ranges merge into one
    assert rs.first_range() == ((7, 0), (7, 2))
    assert len(rs) == 999_999
    rs.add((7, 1_000_001))
    assert rs.range_containing((7, 1_000_001)) == ((7, 1_000_000), (7, 1_000_002))
    rs.remove_up_to((7, 1_500_000))
    assert rs.first_range() == ((7, 1_500_002), (7, 1_500_002))
    assert len(rs) == 249_999


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 30), st.integers(0, 4)), max_size=50),
    st.tuples(st.integers(0, 4), st.integers(-1, 40)),
)
def test_generic_tuple_rangeset_agrees_with_position_rangeset(adds, cut) -> None:
    generic: RangeSet[tuple[int, int]] = RangeSet(successor=lambda p: (p[0], p[1] + 1), chunk_size=3)
    positions = PositionRangeSet(chunk_size=3)
    for ledger, entry, width in adds:
        generic.add_range((ledger, entry), (ledger, entry + width))
        positions.add_range((ledger, entry), (ledger, entry + width))
    assert list(generic) == list(positions)
    generic.remove_up_to(cut)
    positions.remove_up_to(cut)
    assert list(generic) == list(positions)
    assert len(generic) == len(positions)
