"""The managed ledger's callback add (``add_entry_cb``, the broker's SEND path after pub15).

Over the real ledger client and the in-process bookie, and over the memory BookKeeper
with injected failures: each callback is called exactly once, successes in call order
(interleaved with the future and coroutine adds), with the position the entry was stored
at; an error is delivered soon -- never from inside the call that started the add, nor
from inside the writer's bookkeeping -- as the typed retriable error a future would get.
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.managed_ledger.api import EntryMetadata, ManagedLedgerStorageError
from magnetar.testing.ml_conformance import LocalBookieHarness, small_config


@pytest.fixture
async def local(tmp_path):  # type: ignore[no-untyped-def]
    h = await LocalBookieHarness(str(tmp_path / "bookie")).start()
    yield h
    await h.aclose()


async def test_callbacks_complete_once_in_call_order_with_other_adds(local) -> None:  # type: ignore[no-untyped-def]
    f = await local.new_factory(small_config(max_entries_per_ledger=7))  # several rollovers
    ml = await f.open("t/ns/d/pub15-cb-order")
    calls: list[tuple[str, object, object]] = []
    done = asyncio.Event()
    futures = []
    for i in range(60):
        if i % 5 == 1:
            futures.append(ml.add_entry_nowait(b"f%d" % i))
        elif i % 5 == 3:
            futures.append(asyncio.ensure_future(ml.add_entry(b"c%d" % i)))
        else:
            name = f"k{i}"

            def cb(pos, exc, name=name):  # type: ignore[no-untyped-def]
                calls.append((name, pos, exc))
                if len(calls) == 36:
                    done.set()

            meta = EntryMetadata(num_messages=2) if i % 2 else None
            ml.add_entry_cb(name.encode(), cb, metadata=meta)
    await asyncio.wait_for(done.wait(), 30)
    await asyncio.gather(*futures)
    await asyncio.sleep(0.05)
    assert len(calls) == 36  # exactly once each
    assert all(exc is None for _, _, exc in calls)
    positions = [pos for _, pos, _ in calls]
    assert positions == sorted(positions)
    assert [n for n, _, _ in calls] == [f"k{i}" for i in range(60) if i % 5 not in (1, 3)]
    c = await ml.new_non_durable_cursor(type(ml.last_confirmed_entry).EARLIEST)
    stored = {}
    while batch := await c.read_entries(50):
        stored.update({e.position: e.data for e in batch})
    assert all(stored[pos] == name.encode() for name, pos, _ in calls)
    assert ml.number_of_entries == 60


async def test_a_failed_callback_add_is_reported_soon_and_typed(harness) -> None:  # type: ignore[no-untyped-def]
    f = await harness.new_factory(small_config(max_entries_per_ledger=100))
    ml = await f.open("t/ns/d/pub15-cb-fail")
    got: list[tuple[object, object]] = []
    first = asyncio.get_running_loop().create_future()
    ml.add_entry_cb(b"a", lambda pos, exc: first.set_result((pos, exc)))
    p0, e0 = await asyncio.wait_for(first, 10)
    assert e0 is None
    harness.bk.faults.fail_add(1)
    failed = asyncio.get_running_loop().create_future()

    def on_failed(pos, exc):  # type: ignore[no-untyped-def]
        got.append((pos, exc))
        failed.set_result(None)

    handle = ml.add_entry_cb(b"b", on_failed)
    assert got == []  # never from inside the call
    await asyncio.wait_for(failed, 10)
    assert handle.done()
    ((pos, exc),) = got
    assert pos is None and isinstance(exc, ManagedLedgerStorageError) and exc.retriable
    later = await ml.add_entry(b"c")  # the ledger rolled; later adds succeed
    assert later.ledger_id > p0.ledger_id
    assert len(got) == 1


async def test_callback_adds_queued_while_the_ledger_rolls_keep_their_order(harness) -> None:  # type: ignore[no-untyped-def]
    f = await harness.new_factory(small_config(max_entries_per_ledger=2))
    ml = await f.open("t/ns/d/pub15-cb-queue")
    order: list[object] = []
    all_done = asyncio.Event()

    def cb(pos, exc):  # type: ignore[no-untyped-def]
        assert exc is None
        order.append(pos)
        if len(order) == 25:
            all_done.set()

    for i in range(25):
        ml.add_entry_cb(b"%d" % i, cb)
    await asyncio.wait_for(all_done.wait(), 30)
    assert order == sorted(order) and len(set(order)) == 25
    assert len({p.ledger_id for p in order}) >= 12
