"""Adds that complete out of order must not let a reader skip an entry (perfw2).

The mechanism found behind the geo test's lost messages: a managed ledger's
adds reached ``_add_done`` by two routes with a different number of event-loop
hops -- the task-free route (one callback on the ledger handle's future) and
the coroutine route (``add_entry`` awaiting the handle through a shield: two
hops).  A replicated-subscription marker (coroutine) at entry N and the next
replicated message (task-free) at N+1 complete in one batch; N+1 was applied
first, then N set ``current_entries`` back to N+1 while ``last_confirmed``
stayed at N+1, so a cursor at N read N, found the ledger "ends" at N and moved
to ``last_confirmed.next()`` = N+2: entry N+1 was never delivered.

These run the real in-process bookie under a real ledger handle (nothing of the
managed ledger or below is mocked) and check the invariants: last-confirmed
and the entry count only advance contiguously, whatever route each add takes
and however their completions interleave with reads; a read inside the
confirmed range returns every entry or fails; a cursor never passes an entry
it did not return.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from magnetar.managed_ledger.api import ManagedLedgerStorageError, Position
from magnetar.testing.ml_conformance import LocalBookieHarness, small_config


@pytest.fixture
async def local(tmp_path):  # type: ignore[no-untyped-def]
    h = await LocalBookieHarness(str(tmp_path / "bookie")).start()
    yield h
    await h.aclose()


def _check_contiguous(ml) -> None:  # type: ignore[no-untyped-def]
    ll = ml.ledger_list
    if ll.current_id >= 0 and ll.last_confirmed.ledger_id == ll.current_id:
        assert ll.current_entries == ll.last_confirmed.entry_id + 1, (ll.current_entries, ll.last_confirmed)


async def test_marker_by_coroutine_then_message_by_nowait_is_not_skipped(local) -> None:  # type: ignore[no-untyped-def]
    """The geo test's shape: a marker (coroutine add) and the next message (task-free add)
    in flight together; the cursor waiting at the marker must get both."""
    f = await local.new_factory(small_config(max_entries_per_ledger=1000))
    ml = await f.open("t/ns/d/marker-then-message")
    cur = await ml.open_cursor("sub")
    for round_ in range(20):
        marker = asyncio.ensure_future(ml.add_entry(b"marker-%d" % round_))
        await asyncio.sleep(0)  # the coroutine issues its add
        message = ml.add_entry_nowait(b"message-%d" % round_)
        assert message is not None
        await asyncio.gather(marker, message)
        got = await cur.read_entries(10)
        assert [e.data for e in got] == [b"marker-%d" % round_, b"message-%d" % round_]
        _check_contiguous(ml)
    assert cur.read_position == ml.ledger_list.last_confirmed.next()


async def test_out_of_order_completions_with_reads_in_between(local) -> None:  # type: ignore[no-untyped-def]
    """Many adds by both routes, interleaved at random with small reads of two cursors (one
    tailing, one reading in batches of one to three) and across rollovers: every entry is read
    exactly once, in order, and last-confirmed never runs ahead of the entry count."""
    f = await local.new_factory(small_config(max_entries_per_ledger=17))
    ml = await f.open("t/ns/d/mixed-routes")
    tail = await ml.open_cursor("tail")
    small = await ml.open_cursor("small")
    rng = random.Random(15)
    total = 400
    seen: dict[str, list[bytes]] = {"tail": [], "small": []}
    violations: list[str] = []

    async def reader(cur, name: str, batch) -> None:  # type: ignore[no-untyped-def]
        while len(seen[name]) < total:
            got = await cur.read_entries_or_wait(batch())
            seen[name].extend(e.data for e in got)

    def watch() -> None:
        ll = ml.ledger_list
        if ll.current_id >= 0 and ll.last_confirmed.ledger_id == ll.current_id:
            if ll.current_entries != ll.last_confirmed.entry_id + 1:
                violations.append(f"{ll.current_entries} entries, last confirmed {ll.last_confirmed}")

    readers = [
        asyncio.ensure_future(reader(tail, "tail", lambda: 100)),
        asyncio.ensure_future(reader(small, "small", lambda: rng.randint(1, 3))),
    ]
    adds = []
    for i in range(total):
        data = b"%04d" % i
        if rng.random() < 0.3:
            adds.append(asyncio.ensure_future(ml.add_entry(data)))
            await asyncio.sleep(0)  # issued before the next one
        else:
            fut = ml.add_entry_nowait(data)
            adds.append(fut if fut is not None else asyncio.ensure_future(ml.add_entry(data)))
            if fut is None:
                await asyncio.sleep(0)
        watch()
        if rng.random() < 0.2:
            await asyncio.sleep(0)
            watch()
    positions = await asyncio.gather(*adds)
    await asyncio.wait_for(asyncio.gather(*readers), 30)
    assert positions == sorted(positions)
    assert not violations, violations[:5]
    want = [b"%04d" % i for i in range(total)]
    assert seen["tail"] == want
    assert seen["small"] == want


async def test_read_inside_the_confirmed_range_never_comes_back_short(local) -> None:  # type: ignore[no-untyped-def]
    """A ledger list that claims fewer entries than were confirmed (the old symptom) makes a
    cursor read fail loudly instead of stepping over the missing entry."""
    f = await local.new_factory(small_config(max_entries_per_ledger=1000))
    ml = await f.open("t/ns/d/short-read")
    cur = await ml.open_cursor("sub")
    for i in range(3):
        await ml.add_entry(b"%d" % i)
    ll = ml.ledger_list
    ll.current_entries -= 1  # corrupt on purpose: entry 2 is confirmed but "not in the ledger"
    await cur.read_entries(2)
    with pytest.raises(ManagedLedgerStorageError):
        await cur.read_entries(10)
    assert cur.read_position == Position(ll.current_id, 2), "the cursor did not pass entry 2"
    ll.current_entries += 1
    assert [e.data for e in await cur.read_entries(10)] == [b"2"]
    with pytest.raises(ManagedLedgerStorageError):
        await ml.reader.read_range(ll.current_id, 1, 5)  # past the handle's confirmed entries
