"""Lazily persisted acks (mark_delete_rate_per_s > 0): a crash redelivers, a close persists.

On the manual clock nothing advances by itself, so a close or flush that waited out the
rate-limit pause would never return (bounded here by ``asyncio.wait_for``)."""

from __future__ import annotations

import asyncio

from magnetar.managed_ledger.api import InitialPosition
from magnetar.testing.ml_conformance import small_config

CFG = small_config(mark_delete_rate_per_s=0.1, max_entries_per_ledger=100)


async def _acked_but_not_persisted(h, clock, name: str):  # noqa: ANN001, ANN202
    f = await h.new_factory(CFG)
    ml = await f.open(name)
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"m%d" % i) for i in range(20)]
    await c.delete([pos[0]])  # the first snapshot goes at once ...
    await clock.settle()
    assert c.persisted_md == pos[0]
    await c.delete(pos[1:10])  # ... later acks wait for the next slot (10 s away)
    await c.delete([pos[12], pos[13]])  # and an ack hole
    await clock.settle()
    assert c.mark_delete_position == pos[9] and c.persisted_md == pos[0]
    return f, ml, c, pos


async def test_crash_before_the_snapshot_redelivers_never_loses(manual_harness, clock) -> None:
    h = manual_harness
    _f, _ml, _c, pos = await _acked_but_not_persisted(h, clock, "t/ns/d/crash")
    # "crash": a new owner opens the ledger without the old one closing anything
    f2 = await h.new_factory(CFG)
    c2 = (await f2.open("t/ns/d/crash")).cursors["s"]
    assert c2.mark_delete_position == pos[0], "only what was persisted counts as acknowledged"
    again = await c2.read_entries(100)
    assert [e.position for e in again] == pos[1:], "every unpersisted ack is redelivered, none skipped"


async def test_close_persists_the_latest_mark_delete_at_once(manual_harness, clock) -> None:
    h = manual_harness
    f, ml, c, pos = await _acked_but_not_persisted(h, clock, "t/ns/d/close")
    await asyncio.wait_for(ml.close(), 5)  # does not wait out the 10 s pause
    assert c.persisted_md == pos[9]
    f2 = await h.new_factory(CFG)
    c2 = (await f2.open("t/ns/d/close")).cursors["s"]
    assert c2.mark_delete_position == pos[9]
    assert [e.position for e in await c2.read_entries(100)] == [p for p in pos[10:] if p not in pos[12:14]]


async def test_flush_cuts_the_rate_limit_pause_short(manual_harness, clock) -> None:
    _f, _ml, c, pos = await _acked_but_not_persisted(manual_harness, clock, "t/ns/d/flush")
    await asyncio.wait_for(c.flush(), 5)
    assert c.persisted_md == pos[9]
    # and the rate limit still holds afterwards: the next ack waits for its slot
    await c.delete([pos[10]])
    await clock.settle()
    assert c.persisted_md == pos[9]
    await clock.advance(10.0)
    assert c.persisted_md == pos[10]


async def test_grouped_ack_of_runs_and_duplicates(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=5))
    ml = await f.open("t/ns/d/runs")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"x") for _ in range(14)]  # three ledgers
    # runs across a ledger boundary, out of order, with duplicates
    await c.delete([pos[7], pos[3], pos[4], pos[5], pos[4], pos[6], pos[11], pos[12]])
    assert c.mark_delete_position < pos[0] and c.number_of_entries_in_backlog() == 14 - 7
    await c.delete(pos[0:3])
    assert c.mark_delete_position == pos[7]
    assert c.individually_deleted_ranges()[0][1] == pos[12]


async def test_mark_delete_with_properties_is_durable_when_it_returns(manual_harness, clock) -> None:
    _f, _ml, c, pos = await _acked_but_not_persisted(manual_harness, clock, "t/ns/d/props")
    await asyncio.wait_for(c.mark_delete(pos[11], {"compactedTopic.ledgerId": 42}), 5)
    assert c.persisted_md == pos[13]  # the ack hole 12..13 joined mark-delete
    f2 = await manual_harness.new_factory(CFG)
    c2 = (await f2.open("t/ns/d/props")).cursors["s"]
    assert c2.properties == {"compactedTopic.ledgerId": 42} and c2.mark_delete_position == pos[13]
