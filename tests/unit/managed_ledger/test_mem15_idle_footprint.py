"""An idle managed ledger and cursor keep their per-instance state small (issue 15).

What ``benchmarks/topic_memory_bench.py`` measures as RSS, checked on the objects: no instance
dict on the managed ledger, no closures, shared idle defaults until first use -- and the
first use still works (an add records latencies; a durable cursor persists).
"""

from __future__ import annotations

import gc
import types

from magnetar.managed_ledger import offload_process
from magnetar.managed_ledger.api import InitialPosition, shared_config
from magnetar.testing.ml_conformance import small_config


def _closures_of(obj: object) -> list[object]:
    return [r for r in gc.get_referents(obj) if isinstance(r, types.FunctionType | types.MethodType)]


async def test_idle_ledger_shares_its_idle_state_until_first_use(harness) -> None:  # type: ignore[no-untyped-def]
    f = await harness.new_factory(small_config())
    a = await f.open("t/ns/d/mem15-a")
    b = await f.open("t/ns/d/mem15-b")
    for ml in (a, b):
        assert not hasattr(ml, "__dict__"), "ManagedLedgerImpl has __slots__"
        assert ml.offload_state is offload_process.IDLE
        assert _closures_of(ml.reader) == [] and _closures_of(ml.reader.__dict__) == []
    assert a.add_latency.counts is b.add_latency.counts  # the shared zeros
    assert a.verified_empty is b.verified_empty

    await a.add_entry(b"x")
    assert a.add_latency.count == 1 and sum(a.add_latency.counts) == 1
    assert sum(b.add_latency.counts) == 0, "recording into one recorder changed another"
    assert a.offload_progress() is a.offload_progress() is not offload_process.IDLE
    assert b.offload_state is offload_process.IDLE


def test_idle_offload_state_refuses_changes() -> None:
    import pytest

    with pytest.raises(AttributeError):
        offload_process.IDLE.rerun = True  # type: ignore[misc]


def test_equal_configs_are_one_instance() -> None:
    assert shared_config(small_config(max_entries_per_ledger=7)) is shared_config(
        small_config(max_entries_per_ledger=7)
    )
    assert shared_config(small_config(max_entries_per_ledger=7)) != shared_config(
        small_config(max_entries_per_ledger=8)
    )


async def test_durable_cursor_has_no_closures_and_still_persists(harness) -> None:  # type: ignore[no-untyped-def]
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/mem15-cursor")
    pos = await ml.add_entry(b"m")
    c = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    persister = c._persister  # noqa: SLF001
    assert persister is not None and not hasattr(persister, "__dict__")
    assert _closures_of(persister) == []
    await c.mark_delete(pos)
    await persister.flush()
    await ml.close()
    ml2 = await (await harness.new_factory(small_config())).open("t/ns/d/mem15-cursor")
    assert ml2.cursors["sub"].mark_delete_position == pos
