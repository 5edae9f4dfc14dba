"""The compactor and the compacted view over the memory BookKeeper: 10,000 updates over 100 keys."""

from __future__ import annotations

import asyncio

import pytest
from compaction_helpers import Workload, read_view, single

from magnetar.broker.compaction import (
    COMPACTED_TOPIC_LEDGER_PROPERTY,
    COMPACTION_SUBSCRIPTION,
    BatchMode,
    CompactedTopicReader,
    CompactionError,
    Compactor,
    CompactorConfig,
    read_horizon,
)
from magnetar.broker.compaction.compactor import PENDING_LEDGER_PROPERTY
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=200, min_ledger_rollover_time_ms=0)
NAME = "public/default/persistent/compacted"


def assert_latest_per_key(view: list[tuple], model: dict[str, bytes]) -> None:
    keys = [k for _p, k, _v, _n in view]
    assert len(keys) == len(set(keys)), "one message per key"
    assert {k: v for _p, k, v, _n in view} == model
    positions = [p for p, *_ in view]
    assert positions == sorted(positions)


async def open_view(ml, bk, name: str = "sub") -> CompactedTopicReader:
    cursor = await ml.open_cursor(name, InitialPosition.EARLIEST)
    return CompactedTopicReader(ml, cursor, bk, start=Position.EARLIEST)


@pytest.mark.parametrize("mode", list(BatchMode))
async def test_compaction_keeps_latest_per_key_then_live(harness, mode):
    f = await harness.new_factory(CONFIG)
    ml = await f.open(NAME)
    w = Workload(seed=7)
    await w.append(ml, 10_000)
    compactor = Compactor(harness.bk, harness.clock, CompactorConfig(batch_mode=mode))
    result = await compactor.compact(ml)
    assert result.messages_read == 10_000 and result.keys == len(w.model)
    assert 0 < len(w.model) <= 100
    horizon = read_horizon(ml)
    assert horizon is not None and horizon.position == ml.last_confirmed_entry
    assert ml.cursors[COMPACTION_SUBSCRIPTION].properties == {
        COMPACTED_TOPIC_LEDGER_PROPERTY: horizon.ledger_id
    }

    reader = await open_view(ml, harness.bk)
    view = await read_view(reader)
    assert_latest_per_key(view, w.model)
    assert all(p <= horizon.position for p, *_ in view)

    # Newer live messages after the horizon come next, uncompacted.
    live = [single("key-000", b"live-1", 1), single("key-000", b"live-2", 2), single("new", b"n", 3)]
    for data in live:
        await ml.add_entry(data)
    more = await read_view(reader)
    assert [(k, v) for _p, k, v, _n in more] == [
        ("key-000", b"live-1"),
        ("key-000", b"live-2"),
        ("new", b"n"),
    ]
    assert all(p > horizon.position for p, *_ in more)
    await reader.close()

    # A second compaction after more updates folds the old compacted ledger in and deletes it.
    await w.append(ml, 2_000)
    model = dict(w.model)
    second = await compactor.compact(ml)
    assert horizon.ledger_id in second.deleted_ledgers
    assert horizon.ledger_id not in harness.bk.ledger_ids()
    # The live messages above were not in the workload model: merge them in order.
    expected = await expected_after(ml, model)
    view2 = await read_view(await open_view(ml, harness.bk, "sub2"))
    assert_latest_per_key(view2, expected)


async def expected_after(ml, model):
    """The model of everything in the topic, read back plainly (non-compacted) as a cross-check."""
    from compaction_helpers import decode_messages

    out: dict[str, bytes] = {}
    pos = Position.EARLIEST
    while True:
        entries = await ml.read_entries_from(pos, 500)
        if not entries:
            break
        for e in entries:
            for key, value, null in decode_messages(e.data):
                if null or not value:
                    out.pop(key, None)
                else:
                    out[key] = value
        pos = entries[-1].position.next()
    assert {k: v for k, v in out.items() if k != "new" and k != "key-000"} == {
        k: v for k, v in model.items() if k != "key-000"
    }
    return out


async def test_nothing_new_keeps_the_horizon(harness):
    ml = await (await harness.new_factory(CONFIG)).open(NAME)
    compactor = Compactor(harness.bk, harness.clock)
    empty = await compactor.compact(ml)
    assert empty.horizon is None and empty.entries_written == 0
    await ml.add_entry(single("a", b"1", 1))
    first = await compactor.compact(ml)
    again = await compactor.compact(ml)
    assert again.horizon == first.horizon and again.entries_read == 0
    assert first.horizon.ledger_id in harness.bk.ledger_ids()


async def test_failure_mid_phase_two_keeps_previous_state_and_rerun_succeeds(harness):
    ml = await (await harness.new_factory(CONFIG)).open(NAME)
    w = Workload(seed=11)
    await w.append(ml, 3_000)
    compactor = Compactor(harness.bk, harness.clock, CompactorConfig(max_pending_adds=10))
    first = await compactor.compact(ml)
    assert first.entries_written > 20
    before = await read_view(await open_view(ml, harness.bk, "before"))
    await w.append(ml, 3_000)
    ledgers_before = set(harness.bk.ledger_ids())
    harness.bk.faults.fail_add(12)  # the 12th add from now: inside phase two's writes
    with pytest.raises(CompactionError):
        await compactor.compact(ml)
    assert read_horizon(ml) == first.horizon
    assert PENDING_LEDGER_PROPERTY not in ml.cursors[COMPACTION_SUBSCRIPTION].properties
    assert set(harness.bk.ledger_ids()) == ledgers_before, "the failed run's ledger is gone"
    # The previous compacted view is intact (then the live tail after the old horizon).
    again = await read_view(await open_view(ml, harness.bk, "during"))
    assert again[: len(before)] == before
    second = await compactor.compact(ml)
    assert second.horizon.position == ml.last_confirmed_entry
    assert_latest_per_key(await read_view(await open_view(ml, harness.bk, "after")), w.model)


async def test_restart_mid_phase_two_leaves_old_state_and_orphan_is_deleted(harness):
    f1 = await harness.new_factory(CONFIG)
    ml = await f1.open(NAME)
    w = Workload(seed=12)
    await w.append(ml, 2_000)
    compactor = Compactor(harness.bk, harness.clock, CompactorConfig(max_pending_adds=10))
    first = await compactor.compact(ml)
    old_model = dict(w.model)
    await w.append(ml, 2_000)
    harness.bk.faults.hold_adds()
    task = asyncio.ensure_future(compactor.compact(ml))
    for _ in range(200):  # until phase two is parked on its adds
        await asyncio.sleep(0.005)
        if PENDING_LEDGER_PROPERTY in ml.cursors[COMPACTION_SUBSCRIPTION].properties:
            break
    orphan = ml.cursors[COMPACTION_SUBSCRIPTION].properties[PENDING_LEDGER_PROPERTY]
    task.cancel()  # the broker dies here
    with pytest.raises(asyncio.CancelledError):
        await task
    harness.bk.faults.release_adds()
    await f1.aclose()

    f2 = await harness.new_factory(CONFIG)  # a new broker over the same storage
    ml2 = await f2.open(NAME)
    assert read_horizon(ml2) == first.horizon
    view = await read_view(await open_view(ml2, harness.bk))
    compacted_part = [row for row in view if row[0] <= first.horizon.position]
    assert_latest_per_key(compacted_part, old_model)
    assert orphan in harness.bk.ledger_ids()
    result = await Compactor(harness.bk, harness.clock).compact(ml2)
    assert orphan in result.deleted_ledgers and orphan not in harness.bk.ledger_ids()
    assert first.horizon.ledger_id not in harness.bk.ledger_ids()
    assert_latest_per_key(await read_view(await open_view(ml2, harness.bk, "s2")), w.model)


async def test_storage_shrinks_after_trimming_behind_the_compaction_cursor(harness):
    config = ManagedLedgerConfig(
        max_entries_per_ledger=100, min_ledger_rollover_time_ms=0, retention_time_ms=0, retention_size_bytes=0
    )
    ml = await (await harness.new_factory(config)).open(NAME)
    w = Workload(seed=13, batched_ratio=0.2)
    await ml.open_cursor(COMPACTION_SUBSCRIPTION, InitialPosition.EARLIEST)  # holds the data until compacted
    await w.append(ml, 10_000)
    await ml.trim_consumed_ledgers()
    size_before, ledgers_before = ml.total_size, len(ml.ledgers())
    await Compactor(harness.bk, harness.clock).compact(ml)
    await ml.trim_consumed_ledgers()
    size_after, ledgers_after = ml.total_size, len(ml.ledgers())
    assert ledgers_after <= 2 < ledgers_before
    assert size_after < size_before / 10, (size_before, size_after)
    # Everything trimmed is still served from the compacted ledger.
    assert_latest_per_key(await read_view(await open_view(ml, harness.bk)), w.model)


async def test_all_keys_deleted_gives_an_empty_compacted_ledger(harness):
    ml = await (await harness.new_factory(CONFIG)).open(NAME)
    for i in range(30):
        await ml.add_entry(single(f"k{i % 3}", b"v%d" % i, i))
    for k in range(3):
        await ml.add_entry(single(f"k{k}", b"", 100 + k))
    result = await Compactor(harness.bk, harness.clock).compact(ml)
    assert result.entries_written == 0 and result.keys == 0
    reader = await open_view(ml, harness.bk)
    assert await read_view(reader) == []
    await ml.add_entry(single("k0", b"back", 200))
    assert [(k, v) for _p, k, v, _n in await read_view(reader)] == [("k0", b"back")]


async def test_keyless_messages_dropped_unless_retained(harness):
    ml = await (await harness.new_factory(CONFIG)).open(NAME)
    await ml.add_entry(single(None, b"no-key-1", 1))
    await ml.add_entry(single("k", b"v", 2))
    await ml.add_entry(single(None, b"no-key-2", 3))
    await Compactor(harness.bk, harness.clock).compact(ml)
    assert [(k, v) for _p, k, v, _n in await read_view(await open_view(ml, harness.bk, "a"))] == [("k", b"v")]
    ml2 = await (await harness.new_factory(CONFIG)).open(NAME + "-2")
    for data in (single(None, b"no-key-1", 1), single("k", b"v", 2)):
        await ml2.add_entry(data)
    await Compactor(harness.bk, harness.clock, CompactorConfig(retain_null_key=True)).compact(ml2)
    view = [(k, v) for _p, k, v, _n in await read_view(await open_view(ml2, harness.bk, "b"))]
    assert view == [(None, b"no-key-1"), ("k", b"v")]


async def test_too_many_keys_fails_cleanly_and_topic_deletion_drops_the_compacted_ledger(harness):
    ml = await (await harness.new_factory(CONFIG)).open(NAME)
    for i in range(20):
        await ml.add_entry(single(f"k{i}", b"v", i))
    first = await Compactor(harness.bk, harness.clock).compact(ml)
    for i in range(20, 40):
        await ml.add_entry(single(f"k{i}", b"v", i))
    ledgers = set(harness.bk.ledger_ids())
    with pytest.raises(CompactionError, match="more than 25 keys"):
        await Compactor(harness.bk, harness.clock, CompactorConfig(max_keys=25)).compact(ml)
    assert read_horizon(ml) == first.horizon and set(harness.bk.ledger_ids()) == ledgers
    compactor = Compactor(harness.bk, harness.clock)
    assert await compactor.delete_compaction_state(ml) == [first.horizon.ledger_id]
    assert first.horizon.ledger_id not in harness.bk.ledger_ids()
