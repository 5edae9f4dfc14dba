"""The managed ledger's task-free add (``add_entry_nowait``): same positions, order and errors.

The memory BookKeeper's write handle is given a nowait add (its add_entry as a
task: issued in call order, as the ledger client's); the topic's way of adding
-- the nowait future, or the coroutine when it declines -- must then behave as
plain ``add_entry`` does: typed retriable errors, a roll after a failure, no
reordered or duplicate entries across rollovers.
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.managed_ledger.api import ManagedLedgerStorageError
from magnetar.testing.memory_bookkeeper import _WriteHandle
from magnetar.testing.ml_conformance import small_config


@pytest.fixture(autouse=True)
def nowait_handle(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        _WriteHandle,
        "add_entry_nowait",
        lambda self, data: asyncio.ensure_future(self.add_entry(data)),
        raising=False,
    )


def _add(ml, data: bytes):  # type: ignore[no-untyped-def]
    """As the topic adds: the nowait future, else the coroutine as a task."""
    fut = ml.add_entry_nowait(data)
    return fut if fut is not None else asyncio.ensure_future(ml.add_entry(data))


async def _read_all(ml) -> list[bytes]:  # type: ignore[no-untyped-def]
    c = await ml.new_non_durable_cursor(type(ml.last_confirmed_entry).EARLIEST)
    out = []
    while batch := await c.read_entries(50):
        out.extend(e.data for e in batch)
    return out


async def test_nowait_adds_roll_over_in_call_order(harness) -> None:  # type: ignore[no-untyped-def]
    f = await harness.new_factory(small_config(max_entries_per_ledger=3))
    ml = await f.open("t/ns/d/nowait-roll")
    first = ml.add_entry_nowait(b"x")
    assert first is not None, "an open, idle ledger takes the fast path"
    datas = [b"%03d" % i for i in range(40)]
    positions = await asyncio.gather(first, *(_add(ml, d) for d in datas))
    assert positions == sorted(positions) and len(set(positions)) == 41
    assert len({p.ledger_id for p in positions}) >= 10
    assert await _read_all(ml) == [b"x", *datas]
    assert ml.number_of_entries == 41


async def test_nowait_failed_add_is_typed_rolls_and_later_adds_succeed(harness) -> None:  # type: ignore[no-untyped-def]
    f = await harness.new_factory(small_config(max_entries_per_ledger=100))
    ml = await f.open("t/ns/d/nowait-fail")
    p0 = await _add(ml, b"a")
    harness.bk.faults.fail_add(1)
    with pytest.raises(ManagedLedgerStorageError) as ei:
        await _add(ml, b"b")
    assert ei.value.retriable
    p2 = await _add(ml, b"c")
    assert p2.ledger_id > p0.ledger_id and p2.entry_id == 0
    assert await _read_all(ml) == [b"a", b"c"]
    assert harness.bk.entries_of(p0.ledger_id) == [b"a"]
