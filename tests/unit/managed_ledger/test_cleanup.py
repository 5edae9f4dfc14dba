"""Retention, trimming, TTL and rollover by time -- driven by the manual clock, never by sleeping."""

from __future__ import annotations

from magnetar.managed_ledger.api import InitialPosition, Position
from magnetar.testing.ml_conformance import small_config


def _pt(data: bytes) -> int:
    return int(data.split(b":")[0])


async def test_retention_zero_deletes_consumed_ledgers_from_metadata_and_bookies(manual_harness) -> None:
    h = manual_harness
    f = await h.new_factory(small_config(retention_time_ms=0, retention_size_bytes=0))
    ml = await f.open("t/ns/d/ret0")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"x" * 100) for _ in range(30)]
    ledgers = sorted({p.ledger_id for p in pos})
    assert len(ledgers) == 3
    await ml.trim_consumed_ledgers()
    assert [li.ledger_id for li in ml.ledgers()][:3] == ledgers, "nothing consumed: nothing deleted"
    await c.mark_delete(pos[14])  # ledger 0 consumed, ledger 1 half
    await ml.trim_consumed_ledgers()
    ids = [li.ledger_id for li in ml.ledgers()]
    assert ledgers[0] not in ids and ledgers[1] in ids
    assert ledgers[0] not in await h.bk.list_ledgers(), "deleted on the bookies too"
    got = await h.server.session().get("/managed-ledgers/t/ns/d/ret0")
    assert b'"ledgerId":%d' % ledgers[0] not in got.value
    # Restart: the trimmed list is what is recovered, and the cursor reads from where it was.
    await f.aclose()
    f2 = await h.new_factory(small_config(retention_time_ms=0, retention_size_bytes=0))
    ml2 = await f2.open("t/ns/d/ret0")
    assert ledgers[0] not in [li.ledger_id for li in ml2.ledgers()]
    c2 = ml2.cursors["s"]
    assert (await c2.read_entries(1))[0].position == pos[15]


async def test_no_trim_while_a_slow_cursor_needs_the_ledger(manual_harness) -> None:
    h = manual_harness
    f = await h.new_factory(small_config())
    ml = await f.open("t/ns/d/slow")
    fast = await ml.open_cursor("fast", InitialPosition.EARLIEST)
    await ml.open_cursor("slow", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"y") for _ in range(25)]
    await fast.mark_delete(pos[-1])
    await ml.trim_consumed_ledgers()
    assert pos[0].ledger_id in [li.ledger_id for li in ml.ledgers()]
    await ml.delete_cursor("slow")
    await ml.trim_consumed_ledgers()
    assert pos[0].ledger_id not in [li.ledger_id for li in ml.ledgers()]


async def test_retention_time_keeps_consumed_ledgers_until_old(manual_harness, clock) -> None:
    h = manual_harness
    f = await h.new_factory(small_config(retention_time_ms=60_000, retention_size_bytes=-1))
    ml = await f.open("t/ns/d/rettime")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"z") for _ in range(25)]
    await c.mark_delete(pos[-1])
    await ml.trim_consumed_ledgers()
    assert len(ml.ledgers()) == 3
    await clock.advance(59)
    await ml.trim_consumed_ledgers()
    assert len(ml.ledgers()) == 3
    await clock.advance(2)
    await ml.trim_consumed_ledgers()
    assert [li.ledger_id for li in ml.ledgers()] == [pos[-1].ledger_id]


async def test_retention_infinite_keeps_everything(manual_harness, clock) -> None:
    f = await manual_harness.new_factory(small_config(retention_time_ms=-1, retention_size_bytes=-1))
    ml = await f.open("t/ns/d/retinf")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"z") for _ in range(25)]
    await c.mark_delete(pos[-1])
    await clock.advance(10**6)
    await ml.trim_consumed_ledgers()
    assert len(ml.ledgers()) == 3


async def test_retention_size_bounds_storage(manual_harness) -> None:
    entry_bytes, per_ledger = 1000, 10
    size_s = 35_000  # 3.5 ledgers' worth
    f = await manual_harness.new_factory(small_config(retention_time_ms=-1, retention_size_bytes=size_s))
    ml = await f.open("t/ns/d/retsize")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    for round_ in range(12):
        ps = [await ml.add_entry(b"s" * entry_bytes) for _ in range(per_ledger)]
        await c.mark_delete(ps[-1])
        await ml.trim_consumed_ledgers()
        assert ml.total_size <= size_s + entry_bytes * per_ledger, (round_, ml.total_size)
    assert ml.total_size >= size_s - entry_bytes * per_ledger, "retention keeps about S"


async def test_ttl_moves_mark_delete_by_publish_time(manual_harness, clock) -> None:
    f = await manual_harness.new_factory(small_config())
    ml = await f.open("t/ns/d/ttl")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = []
    for _i in range(20):
        pos.append(await ml.add_entry(b"%d:payload" % clock.time_ms()))
        await clock.advance(1)  # one entry a second
    # now = t0 + 20 s; TTL 10.5 s expires entries published at t0 .. t0+9 s
    assert await c.expire_messages(10_500, _pt)
    assert c.mark_delete_position == pos[9]
    assert not await c.expire_messages(10_500, _pt)
    await clock.advance(100)
    assert await c.expire_messages(10_500, _pt)
    assert c.mark_delete_position == pos[-1] and c.number_of_entries_in_backlog() == 0


async def test_rollover_by_time_and_size(manual_harness, clock) -> None:
    cfg = small_config(
        max_entries_per_ledger=10**6,
        max_size_per_ledger_bytes=500,
        min_ledger_rollover_time_ms=5_000,
        max_ledger_rollover_time_ms=60_000,
    )
    f = await manual_harness.new_factory(cfg)
    ml = await f.open("t/ns/d/rolltime")
    p0 = await ml.add_entry(b"a" * 600)  # over the size, but the minimum time has not passed
    p1 = await ml.add_entry(b"b")
    assert p1.ledger_id == p0.ledger_id
    await clock.advance(6)
    p2 = await ml.add_entry(b"c")  # now full and old enough: this add goes to a new ledger
    p3 = await ml.add_entry(b"d")
    assert p2.ledger_id > p0.ledger_id and p3.ledger_id == p2.ledger_id
    await clock.advance(61)
    ml.check_rollover_by_time()  # the factory's periodic check
    await clock.settle()
    p4 = await ml.add_entry(b"e")
    assert p4.ledger_id > p3.ledger_id


async def test_find_position_by_publish_time_and_reset(manual_harness, clock) -> None:
    f = await manual_harness.new_factory(small_config())
    ml = await f.open("t/ns/d/bytime")
    c = await ml.open_cursor("s", InitialPosition.LATEST)
    pos = [await ml.add_entry(b"%d:x" % (1000 + 10 * i)) for i in range(40)]
    p = await c.find_position_by_publish_time(1000 + 10 * 17 - 5, _pt)
    assert p == pos[17]
    assert await c.find_position_by_publish_time(0, _pt) == pos[0]
    late = await c.find_position_by_publish_time(10**9, _pt)
    assert late > pos[-1]
    await c.reset_cursor(p)
    got = await c.read_entries(3)
    assert [e.position for e in got] == pos[17:20]
    assert c.number_of_entries_in_backlog() == 23
    await c.reset_cursor(Position.EARLIEST)  # type: ignore[attr-defined]
    assert c.number_of_entries_in_backlog() == 40


async def test_backlog_size_vs_storage_size(manual_harness) -> None:
    f = await manual_harness.new_factory(small_config(retention_time_ms=-1, retention_size_bytes=-1))
    ml = await f.open("t/ns/d/sizes")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"q" * 100) for _ in range(30)]
    assert ml.total_size == 3000
    assert ml.estimated_backlog_size_bytes() == c.estimated_backlog_size_bytes() == 3000
    await c.mark_delete(pos[14])
    assert c.estimated_backlog_size_bytes() == 1500
    await ml.trim_consumed_ledgers()
    assert ml.total_size == 3000, "infinite retention keeps consumed ledgers: storage > backlog"


async def test_mark_delete_rate_limit_batches_snapshots_on_the_clock(manual_harness, clock) -> None:
    h = manual_harness
    cfg = small_config(mark_delete_rate_per_s=1.0, max_entries_per_ledger=100)
    f = await h.new_factory(cfg)
    ml = await f.open("t/ns/d/rate")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"r") for _ in range(10)]
    await c.mark_delete(pos[0])  # returns at once; the first snapshot is written right away
    await clock.settle()
    writes = c.store.persists
    for p in pos[1:6]:
        await c.mark_delete(p)  # acks return without waiting for a snapshot
    await clock.settle()
    assert c.store.persists == writes, "no snapshot before a second has passed"
    # A crash now loses the unpersisted acks: those entries are redelivered, none lost.
    f_crash = await h.new_factory(cfg)
    c_crash = (await f_crash.open("t/ns/d/rate")).cursors["s"]
    assert c_crash.mark_delete_position == pos[0]
    await f_crash.aclose()
    # (the crashed owner is fenced now; a fresh start shows the same durable state)
    f2 = await h.new_factory(cfg)
    ml2 = await f2.open("t/ns/d/rate")
    c2 = ml2.cursors["s"]
    await c2.mark_delete(pos[3])
    await clock.advance(1.0)
    assert c2.store.persists >= 1
    await c2.mark_delete(pos[5])
    await clock.advance(1.0)
    f3 = await h.new_factory(cfg)
    assert (await f3.open("t/ns/d/rate")).cursors["s"].mark_delete_position == pos[5]
