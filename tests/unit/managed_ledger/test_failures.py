"""Scripted ledger failures: typed errors, recovery by rolling, no duplicate or reordered entries."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from magnetar.bookkeeper.api import LedgerFencedError
from magnetar.managed_ledger.api import (
    InitialPosition,
    ManagedLedgerClosedError,
    ManagedLedgerFencedError,
    ManagedLedgerStorageError,
    Position,
)
from magnetar.managed_ledger.state import MLState
from magnetar.testing.ml_conformance import small_config


async def _read_all(ml) -> list[bytes]:
    c = await ml.new_non_durable_cursor(type(ml.last_confirmed_entry).EARLIEST)
    out = []
    while batch := await c.read_entries(50):
        out.extend(e.data for e in batch)
    return out


async def test_failed_add_is_typed_and_ledger_rolls(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=100))
    ml = await f.open("t/ns/d/fail-add")
    p0 = await ml.add_entry(b"a")
    harness.bk.faults.fail_add(1)
    with pytest.raises(ManagedLedgerStorageError) as ei:
        await ml.add_entry(b"b")
    assert ei.value.retriable
    p2 = await ml.add_entry(b"c")
    assert p2.ledger_id > p0.ledger_id, "rolled to a new ledger"
    assert p2.entry_id == 0
    assert await _read_all(ml) == [b"a", b"c"]
    # The failed ledger was closed at its LAC: the failed entry is not part of it.
    assert harness.bk.entries_of(p0.ledger_id) == [b"a"]


async def test_pipelined_adds_fail_after_the_failed_one_and_order_holds(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=1000))
    ml = await f.open("t/ns/d/pipeline-fail")
    await ml.add_entry(b"first")
    harness.bk.faults.fail_add(5)
    harness.bk.faults.hold_adds()  # all ten are in flight on the ledger when the fifth fails
    pending = [asyncio.ensure_future(ml.add_entry(b"%d" % i)) for i in range(10)]
    await asyncio.sleep(0)
    harness.bk.faults.release_adds()
    results = await asyncio.gather(*pending, return_exceptions=True)
    ok = [r for r in results if not isinstance(r, Exception)]
    failed = [r for r in results if isinstance(r, Exception)]
    assert len(ok) == 4 and all(isinstance(e, ManagedLedgerStorageError) for e in failed)
    assert results[:4] == ok, "the first four (before the failure) succeeded, in order"
    # Retry the failed ones: they land in a new ledger after everything else.
    retried = [await ml.add_entry(b"%d" % i) for i in range(4, 10)]
    assert retried[0].ledger_id > ok[-1].ledger_id
    data = await _read_all(ml)
    assert data == [b"first"] + [b"%d" % i for i in range(10)], "no duplicates, no reordering"


async def test_ledger_fenced_by_a_repair_rolls_over_and_keeps_its_entries(harness) -> None:
    """Auto-recovery's replication worker fences (recovers and closes) the open ledger that lost
    a bookie.  That is a BookKeeper event, not a new owner: the managed ledger rolls over, records
    the fenced ledger's confirmed entries, and goes on -- nothing is dropped later."""
    cfg = small_config(max_entries_per_ledger=1000, retention_time_ms=-1, retention_size_bytes=-1)
    f = await harness.new_factory(cfg)
    ml = await f.open("t/ns/d/fence")
    cur = await ml.open_cursor("s", InitialPosition.EARLIEST)
    p = await ml.add_entry(b"x")
    harness.bk.fence_now(p.ledger_id)  # as the replication worker's LedgerRecovery does
    with pytest.raises(ManagedLedgerStorageError) as ei:
        await ml.add_entry(b"y")  # the add that met the fence: not written, retriable
    assert ei.value.retriable
    assert ml.state is not MLState.FENCED
    pz = await ml.add_entry(b"z")
    assert pz.ledger_id > p.ledger_id and ml.state is MLState.LEDGER_OPENED
    got = await cur.read_entries(10)
    assert [e.data for e in got] == [b"x", b"z"]
    await cur.mark_delete(got[-1].position)  # all consumed; retention keeps the ledgers
    await ml.trim_consumed_ledgers()
    assert [(li.ledger_id, li.entries) for li in ml.ledgers()][0] == (p.ledger_id, 1)
    await ml.close()
    ml2 = await (await harness.new_factory(cfg)).open("t/ns/d/fence")  # the next owner
    await ml2.trim_consumed_ledgers()
    assert [(li.ledger_id, li.entries) for li in ml2.ledgers()][:2] == [(p.ledger_id, 1), (pz.ledger_id, 1)]
    assert await _read_all(ml2) == [b"x", b"z"]


async def test_ledger_listed_empty_is_deleted_only_if_bookkeeper_agrees(harness) -> None:
    """The trimmer drops (and deletes) a ledger the list counts empty only when its closed
    metadata has no entry either.  One BookKeeper recovered entries in (adds that failed to
    their callers) is kept, never deleted, and its entries stay unlisted (no duplicates)."""
    cfg = small_config(max_entries_per_ledger=2, retention_time_ms=-1, retention_size_bytes=-1)
    f = await harness.new_factory(cfg)
    ml = await f.open("t/ns/d/listed-empty")
    cur = await ml.open_cursor("s", InitialPosition.EARLIEST)
    harness.bk.faults.fail_add(1)  # the first ledger gets no entry: empty, rolled over
    with pytest.raises(ManagedLedgerStorageError):
        await ml.add_entry(b"failed")
    pos = [await ml.add_entry(b"%d" % i) for i in range(4)]
    last = await ml.add_entry(b"4")
    empty = ml.ledgers()[0].ledger_id
    assert ml.ledger_list.get(empty).entries == 0 and empty < pos[0].ledger_id
    # A ledger listed with 0 entries that BookKeeper holds entries in.
    first = ml.ledger_list.get(pos[0].ledger_id)
    ml.ledger_list.set(dataclasses.replace(first, entries=0, size_bytes=0))
    await cur.mark_delete(last)  # everything consumed; retention keeps the non-empty ledgers
    await ml.trim_consumed_ledgers()
    after = {li.ledger_id: li.entries for li in ml.ledgers()}
    assert pos[0].ledger_id in after and pos[0].ledger_id in harness.bk.ledger_ids(), after
    assert harness.bk.entries_of(pos[0].ledger_id) == [b"0", b"1"]  # not deleted
    assert empty not in after and empty not in harness.bk.ledger_ids()  # truly empty: dropped
    await ml.trim_consumed_ledgers()  # checked once; still kept
    assert pos[0].ledger_id in {li.ledger_id for li in ml.ledgers()}
    await ml.close()
    ml2 = await (await harness.new_factory(cfg)).open("t/ns/d/listed-empty")
    assert await _read_all(ml2) == [b"2", b"3", b"4"]


async def test_metadata_cas_failure_fences(harness) -> None:
    keep = small_config(retention_time_ms=-1, retention_size_bytes=-1)  # no cursor: retention keeps "1"
    f1 = await harness.new_factory(keep)
    ml1 = await f1.open("t/ns/d/cas")
    await ml1.add_entry(b"1")
    f2 = await harness.new_factory(keep)
    ml2 = await f2.open("t/ns/d/cas")  # takes over: recovers ml1's ledger (fencing it)
    await ml2.add_entry(b"2")
    with pytest.raises(ManagedLedgerFencedError):
        await ml1.add_entry(b"stale")
    assert await _read_all(ml2) == [b"1", b"2"]


async def test_second_open_with_stale_version_is_fenced(harness) -> None:
    """Two owners race: both read version V; the second CAS fails."""
    f1 = await harness.new_factory()
    ml1 = await f1.open("t/ns/d/race")
    await ml1.add_entry(b"1")
    f2 = await harness.new_factory()
    await f2.open("t/ns/d/race")
    # ml1 rolls over now: its metadata write must fail with a fenced error.
    ml1.config = small_config(max_entries_per_ledger=1)
    with pytest.raises(ManagedLedgerFencedError):
        await ml1.add_entry(b"stale")
        for _ in range(3):
            await ml1.add_entry(b"stale")


async def test_create_failure_then_next_add_retries(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=2))
    ml = await f.open("t/ns/d/create-fail")
    harness.bk.faults.fail_create(1)
    await ml.add_entry(b"a")
    await ml.add_entry(b"b")  # full -> rollover; create fails
    await asyncio.sleep(0.01)
    assert ml.state is MLState.WRITE_FAILED
    p = await ml.add_entry(b"c")  # triggers a new create, which succeeds
    assert ml.state is MLState.LEDGER_OPENED
    assert p.entry_id == 0
    assert await _read_all(ml) == [b"a", b"b", b"c"]


async def test_adds_during_rollover_keep_call_order(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=3))
    ml = await f.open("t/ns/d/rollorder")
    harness.bk.faults.hold_adds()
    tasks = [asyncio.ensure_future(ml.add_entry(b"%03d" % i)) for i in range(20)]
    await asyncio.sleep(0.01)
    harness.bk.faults.release_adds()
    more = [asyncio.ensure_future(ml.add_entry(b"%03d" % i)) for i in range(20, 40)]
    positions = await asyncio.gather(*tasks, *more)
    assert positions == sorted(positions) and len(set(positions)) == 40
    assert await _read_all(ml) == [b"%03d" % i for i in range(40)]


async def test_delayed_reads_and_closed_errors(harness) -> None:
    f = await harness.new_factory()
    ml = await f.open("t/ns/d/delay")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    for i in range(5):
        await ml.add_entry(b"%d" % i)
    f.cache.clear()
    harness.bk.faults.delay_reads(0.01)
    got = await c.read_entries(5)
    assert [e.data for e in got] == [b"%d" % i for i in range(5)]
    await ml.close()
    with pytest.raises(ManagedLedgerClosedError):
        await ml.add_entry(b"x")


async def test_fenced_error_from_bk_without_a_new_owner_is_retriable(harness) -> None:
    f = await harness.new_factory()
    ml = await f.open("t/ns/d/fence2")
    harness.bk.faults.fail_add(1, LedgerFencedError("scripted"))
    with pytest.raises(ManagedLedgerStorageError) as ei:
        await ml.add_entry(b"x")
    assert ei.value.retriable
    assert (await ml.add_entry(b"y")).entry_id == 0  # on the next ledger
    assert await _read_all(ml) == [b"y"]


async def test_old_owner_cursor_is_fenced_new_owner_keeps_acking(harness) -> None:
    f1 = await harness.new_factory()
    ml1 = await f1.open("t/ns/d/cursor-owner")
    c1 = await ml1.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml1.add_entry(b"%d" % i) for i in range(6)]
    await c1.delete([pos[0]])
    f2 = await harness.new_factory()
    ml2 = await f2.open("t/ns/d/cursor-owner")
    c2 = ml2.cursors["s"]
    assert c2.mark_delete_position == pos[0]
    with pytest.raises(ManagedLedgerFencedError):
        await c1.delete([pos[1]])
    await c2.delete([pos[2]])
    await c2.mark_delete(pos[1])
    f3 = await harness.new_factory()
    c3 = (await f3.open("t/ns/d/cursor-owner")).cursors["s"]
    assert c3.mark_delete_position == pos[2]


async def test_reader_on_terminated_ledger_gets_no_more_entries(harness) -> None:
    from magnetar.managed_ledger.api import NoMoreEntriesError

    f = await harness.new_factory()
    ml = await f.open("t/ns/d/term-read")
    for i in range(3):
        await ml.add_entry(b"%d" % i)
    reader = await ml.new_non_durable_cursor(Position.EARLIEST)  # type: ignore[attr-defined]
    assert len(await reader.read_entries_or_wait(10)) == 3
    waiting = asyncio.ensure_future(reader.read_entries_or_wait(10))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    await ml.terminate()
    with pytest.raises(NoMoreEntriesError):
        await asyncio.wait_for(waiting, 5)


async def test_reads_skip_an_empty_ledger_left_by_a_failure(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=2))
    ml = await f.open("t/ns/d/empty-ledger")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    a = [await ml.add_entry(b"a%d" % i) for i in range(2)]  # fills the first ledger
    harness.bk.faults.fail_add(1)  # the first add to the second ledger fails: it stays empty
    with pytest.raises(ManagedLedgerStorageError):
        await ml.add_entry(b"lost")
    b = [await ml.add_entry(b"b%d" % i) for i in range(2)]
    infos = ml.ledgers()
    empty = [li.ledger_id for li in infos if li.entries == 0 and li.ledger_id != ml.ledger_list.current_id]
    assert len(empty) == 1 and a[0].ledger_id < empty[0] < b[0].ledger_id
    assert ml.number_of_entries == 4 and c.number_of_entries_in_backlog() == 4
    got = await c.read_entries(10)
    assert [e.data for e in got] == [b"a0", b"a1", b"b0", b"b1"]
    await c.mark_delete(a[1])
    assert c.number_of_entries_in_backlog() == 2
    await ml.trim_consumed_ledgers()
    assert empty[0] not in [li.ledger_id for li in ml.ledgers()], "the empty ledger is trimmed too"


async def test_inflight_adds_are_bounded_and_stay_in_order(harness, monkeypatch) -> None:
    import magnetar.managed_ledger.writer as writer

    monkeypatch.setattr(writer, "MAX_INFLIGHT_ADDS", 50)
    f = await harness.new_factory(small_config(max_entries_per_ledger=10_000))
    ml = await f.open("t/ns/d/inflight")
    harness.bk.faults.hold_adds()
    tasks = [asyncio.ensure_future(ml.add_entry(b"%04d" % i)) for i in range(300)]
    for _ in range(5):
        await asyncio.sleep(0)
    handle = ml._handle
    assert 0 < handle._pending <= 50, handle._pending
    assert ml.internal_stats()["pendingAddEntriesCount"] == 300
    harness.bk.faults.release_adds()
    more = [asyncio.ensure_future(ml.add_entry(b"%04d" % i)) for i in range(300, 400)]
    positions = await asyncio.gather(*tasks, *more)
    assert positions == sorted(positions) and len(set(positions)) == 400
    assert await _read_all(ml) == [b"%04d" % i for i in range(400)]


async def test_fenced_owner_cannot_delete(harness) -> None:
    f1 = await harness.new_factory()
    ml1 = await f1.open("t/ns/d/nodelete")
    await ml1.add_entry(b"keep")
    f2 = await harness.new_factory()
    ml2 = await f2.open("t/ns/d/nodelete")
    with pytest.raises(ManagedLedgerFencedError):
        await ml1.delete()  # has not noticed yet: the CAS before deleting tells it
    with pytest.raises(ManagedLedgerFencedError):
        await ml1.add_entry(b"x")
    assert await _read_all(ml2) == [b"keep"]


async def test_ledger_left_open_by_a_failed_close_is_still_fully_readable(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=5))
    ml = await f.open("t/ns/d/close-fail")
    harness.bk.faults.fail_close(1)
    pos = [await ml.add_entry(b"c%d" % i) for i in range(8)]  # rolls after 5; that close fails
    first = pos[0].ledger_id
    assert not (await harness.bk.get_ledger_metadata(first)).is_closed
    f.cache.clear()
    c = await ml.new_non_durable_cursor(Position.EARLIEST)  # type: ignore[attr-defined]
    got = await c.read_entries(10)
    assert [e.data for e in got] == [b"c%d" % i for i in range(8)], "the last entry of the open ledger too"


async def test_reset_during_an_inflight_read_wins(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=100))
    ml = await f.open("t/ns/d/reset-race")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"%d" % i) for i in range(20)]
    f.cache.clear()
    harness.bk.faults.delay_reads(0.05)
    reading = asyncio.ensure_future(c.read_entries(10))
    await asyncio.sleep(0.01)
    await c.reset_cursor(pos[3])
    got = await reading  # re-read from the new position, not from the old one
    assert [e.position for e in got] == pos[3:13]
    assert c.read_position == pos[13]


async def test_failed_open_releases_what_it_opened(harness) -> None:
    f = await harness.new_factory()
    ml = await f.open("t/ns/d/open-fail")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    await ml.add_entry(b"x")
    p = await ml.add_entry(b"y")
    await c.delete([p])  # the cursor now has a cursor ledger
    await f.aclose()
    f2 = await harness.new_factory()
    # Recovering the last ledger fails: the open fails with a typed error...
    harness.bk.faults.fail_open(1)
    with pytest.raises(ManagedLedgerStorageError):
        await f2.open("t/ns/d/open-fail")
    assert f2.get_if_open("t/ns/d/open-fail") is None
    # ...so does recovering the cursor (after a new ledger was created: it is released)...
    opens = {"n": 0}
    real_open = harness.bk.open_ledger

    async def open_failing_second(ledger_id, **kw):  # noqa: ANN001, ANN202
        opens["n"] += 1
        if opens["n"] == 2:
            from magnetar.bookkeeper.api import NotEnoughBookiesError

            raise NotEnoughBookiesError("scripted: cursor ledger unavailable")
        return await real_open(ledger_id, **kw)

    harness.bk.open_ledger = open_failing_second
    with pytest.raises(ManagedLedgerStorageError):
        await f2.open("t/ns/d/open-fail")
    harness.bk.open_ledger = real_open
    still_open = [
        lid for lid in harness.bk.ledger_ids() if not (await harness.bk.get_ledger_metadata(lid)).is_closed
    ]
    assert still_open == [], "the ledger the failed open created was closed again"
    # ...and a retry succeeds with everything intact.
    ml2 = await f2.open("t/ns/d/open-fail")
    assert await _read_all(ml2) == [b"x", b"y"]
    assert ml2.cursors["s"].is_acknowledged(p)
