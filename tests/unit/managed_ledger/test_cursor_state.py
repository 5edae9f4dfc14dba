"""Cursor state: the snapshot codec, the persisted-range cap, many holes, stats."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.managed_ledger.api import InitialPosition, Position
from magnetar.managed_ledger.snapshot import CursorSnapshot, SnapshotError, decode, encode
from magnetar.testing.ml_conformance import small_config


def _ranges_from(points: list[tuple[int, int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    out = []
    last = {}
    for lid, gap, length in sorted(points):
        start = last.get(lid, -1) + 1 + gap
        out.append(((lid, start), (lid, start + length)))
        last[lid] = start + length + 1
    return out


@settings(max_examples=60, deadline=None)
@given(
    md=st.tuples(st.integers(-1, 10**12), st.integers(-1, 10**9)),
    points=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1000), st.integers(0, 50)), max_size=40),
    words=st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4), max_size=5),
    props=st.dictionaries(st.text(max_size=10), st.integers(-(2**62), 2**62), max_size=4),
)
def test_snapshot_roundtrip(md, points, words, props) -> None:
    base = md[0] + 1
    ranges = [((base + lid, a), (base + lid, b)) for (lid, a), (_, b) in _ranges_from(points)]
    ack_sets = [((base + 7, i * 3), w) for i, w in enumerate(words)]
    snap = CursorSnapshot(md, ranges, ack_sets, props)
    assert decode(encode(snap)) == snap


def test_snapshot_rejects_corruption() -> None:
    data = bytearray(encode(CursorSnapshot((1, 2), [((1, 4), (1, 6))], [], {"a": 1})))
    data[6] ^= 0xFF
    with pytest.raises(SnapshotError):
        decode(bytes(data))
    with pytest.raises(SnapshotError):
        decode(b"nope")


def test_alternating_snapshot_is_compact() -> None:
    ranges = [((5, 2 * i + 1), (5, 2 * i + 1)) for i in range(10_000)]
    data = encode(CursorSnapshot((5, 0), ranges))
    assert len(data) < 10_000 * 3 + 64


async def _alternating(harness, n_entries: int, cap: int):
    cfg = small_config(max_entries_per_ledger=n_entries // 4, max_unacked_ranges_to_persist=cap)
    f = await harness.new_factory(cfg)
    ml = await f.open("t/ns/d/holes")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = []
    chunk = 1000
    for start in range(0, n_entries, chunk):
        pos.extend([await ml.add_entry(b"m") for _ in range(min(chunk, n_entries - start))])
    # ack every second entry, leaving the first unacked so mark-delete stays put
    odd = pos[1::2]
    for i in range(0, len(odd), 5000):
        await c.delete(odd[i : i + 5000])
    return f, ml, c, pos


async def test_alternating_acks_restore_within_cap(harness) -> None:
    n, cap = 20_000, 10_000
    f, ml, c, pos = await _alternating(harness, n, cap)
    holes_before = c.individually_deleted_ranges()
    assert len(holes_before) == n // 2
    assert c.number_of_entries_in_backlog() == n // 2
    await f.aclose()
    f2 = await harness.new_factory(
        small_config(max_entries_per_ledger=n // 4, max_unacked_ranges_to_persist=cap)
    )
    c2 = (await f2.open("t/ns/d/holes")).cursors["s"]
    assert c2.individually_deleted_ranges() == holes_before
    assert c2.number_of_entries_in_backlog() == n // 2
    assert c2.store.snapshot_bytes_last < 4 * n


async def test_ranges_past_the_cap_are_redelivered_not_lost(harness) -> None:
    n, cap = 2000, 100
    f, ml, c, pos = await _alternating(harness, n, cap)
    await f.aclose()
    f2 = await harness.new_factory(
        small_config(max_entries_per_ledger=n // 4, max_unacked_ranges_to_persist=cap)
    )
    c2 = (await f2.open("t/ns/d/holes")).cursors["s"]
    ranges = c2.individually_deleted_ranges()
    assert len(ranges) == cap, "the first `cap` ranges (nearest mark-delete) survive"
    assert c2.mark_delete_position == c.mark_delete_position
    last_kept = ranges[-1][1]
    # Nothing unacked became acked; acks past the cap come back as unacked (redelivery).
    for i, p in enumerate(pos):
        if i % 2 == 0:
            assert not c2.is_acknowledged(p)
        else:
            assert c2.is_acknowledged(p) == (p <= last_kept)
    got = await c2.read_entries(10**6)
    assert len(got) == n // 2 + (n // 2 - cap)


async def test_cursor_internal_stats_fields(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/stats")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"e") for _ in range(12)]
    await c.delete([pos[2], pos[3], pos[7]])
    await c.read_entries(4)
    st_ = ml.internal_stats()
    cs = st_["cursors"]["s"]
    assert cs["markDeletePosition"] == str(Position(pos[0].ledger_id, -1))
    assert cs["individuallyDeletedMessages"] == f"[({pos[1]}..{pos[3]}], ({pos[6]}..{pos[7]}]]"
    assert cs["totalNonContiguousDeletedMessagesRange"] == 2
    assert cs["readPosition"] == str(pos[6])
    assert cs["cursorLedger"] >= 0
    assert st_["numberOfEntries"] == 12 and st_["entriesAddedCounter"] == 12
    assert st_["state"] == "LedgerOpened"
    assert st_["lastConfirmedEntry"] == str(ml.last_confirmed_entry)
    assert [x["ledgerId"] for x in st_["ledgers"]] == [li.ledger_id for li in ml.ledgers()]


async def test_throttled_persistence_and_flush(harness) -> None:
    f = await harness.new_factory(small_config(mark_delete_rate_per_s=1000.0))
    ml = await f.open("t/ns/d/throttle")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"e") for _ in range(50)]
    for p in pos[::2]:
        await c.delete([p])
    await c.flush()
    persists = c.store.persists
    assert persists < 26, "acks were coalesced into fewer snapshots"
    await f.aclose()
    f2 = await harness.new_factory(small_config())
    c2 = (await f2.open("t/ns/d/throttle")).cursors["s"]
    assert c2.individually_deleted_ranges() == c.individually_deleted_ranges()


@pytest.mark.slow
async def test_million_alternating_acks(harness) -> None:
    n, cap = 2_000_000, 10_000
    f, ml, c, pos = await _alternating(harness, n, cap)
    assert len(c.individually_deleted_ranges()) == n // 2
    await f.aclose()
    f2 = await harness.new_factory(
        small_config(max_entries_per_ledger=n // 4, max_unacked_ranges_to_persist=cap)
    )
    c2 = (await f2.open("t/ns/d/holes")).cursors["s"]
    assert len(c2.individually_deleted_ranges()) == cap
    assert c2.store.snapshot_bytes_last < 40_000


async def test_backlog_in_messages_with_batch_counts(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/msgs")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"b", num_messages=5) for _ in range(12)]  # 12 entries, 60 messages
    assert ml.number_of_messages == 60
    assert c.number_of_entries_in_backlog() == 12 and c.number_of_messages_in_backlog() == 60
    await c.delete([pos[3], pos[4]])
    assert c.number_of_messages_in_backlog() == 50
    await c.ack_batch_indexes(pos[6], [0b11000])  # 3 of 5 acked, 2 pending
    assert c.number_of_entries_in_backlog() == 10 and c.number_of_messages_in_backlog() == 47
    await c.mark_delete(pos[0])
    assert c.number_of_messages_in_backlog() == 42


async def test_cursor_ledger_rolls_and_old_one_is_deleted(harness) -> None:
    f = await harness.new_factory(small_config(cursor_max_entries_per_ledger=3))
    ml = await f.open("t/ns/d/cursor-roll")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"e") for _ in range(10)]
    seen = set()
    for p in pos:
        await c.mark_delete(p)
        seen.add(c.store.cursor_ledger_id)
    assert len(seen) >= 3, "a new cursor ledger every 3 snapshots"
    live = set(harness.bk.ledger_ids())
    assert c.store.cursor_ledger_id in live
    assert len(seen & live) == 1, "old cursor ledgers are deleted"
    await f.aclose()
    c2 = (await (await harness.new_factory()).open("t/ns/d/cursor-roll")).cursors["s"]
    assert c2.mark_delete_position == pos[-1]


async def test_cursor_state_falls_back_to_metadata_when_no_ledger(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/cursor-meta")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"e") for _ in range(8)]
    harness.bk.faults.fail_create(1)  # the cursor ledger cannot be created
    await c.delete([pos[1], pos[3]])
    assert c.store.cursor_ledger_id == -1
    node = await harness.server.session().get("/managed-ledgers/t/ns/d/cursor-meta/s")
    assert b'"individualDeletedMessages":[{' in node.value
    await f.aclose()
    c2 = (await (await harness.new_factory()).open("t/ns/d/cursor-meta")).cursors["s"]
    assert c2.individually_deleted_ranges() == c.individually_deleted_ranges()
    await c2.delete([pos[0]])  # the next snapshot goes to a new cursor ledger again
    assert c2.store.cursor_ledger_id >= 0
    assert c2.mark_delete_position == pos[1]
