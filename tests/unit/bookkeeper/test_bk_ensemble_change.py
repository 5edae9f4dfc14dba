"""Ensemble changes: a failed or silent bookie is replaced without losing or reordering entries."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from bk_helpers import FAST, make_env

from magnetar.bookkeeper import api
from magnetar.testing.clock import virtual_time


async def _write(wh, datas):  # type: ignore[no-untyped-def]
    return await asyncio.gather(*(wh.add_entry(d) for d in datas))


@virtual_time
async def test_bookie_failure_mid_stream_triggers_an_ensemble_change() -> None:
    env = await make_env(5)
    wh = await env.bk.create_ledger(3, 2, 2)
    first = [b"a%d" % i for i in range(10)]
    assert await _write(wh, first) == list(range(10))
    victim = wh.metadata.ensembles[0][1][1]
    env.pool[victim].crash()
    second = [b"b%d" % i for i in range(30)]
    assert await _write(wh, second) == list(range(10, 40))
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert len(md.ensembles) == 2
    start, ensemble = md.ensembles[1]
    assert start == 10 and victim not in ensemble
    assert wh.ensemble_changes == 1
    # every entry is on its whole write set per the metadata (the resends happened)
    for e in range(10, 40):
        assert set(md.write_set(e)) <= set(env.holders(wh.ledger_id, e))
    await wh.close()
    reader = await env.client().open_ledger(wh.ledger_id)
    assert [e.data for e in await reader.read(0, 39)] == first + second


@virtual_time
async def test_a_silent_bookie_is_replaced_after_the_add_timeout() -> None:
    env = await make_env(4)
    wh = await env.bk.create_ledger(3, 3, 3)
    await wh.add_entry(b"0")
    silent = wh.metadata.ensembles[0][1][0]
    env.pool[silent].hang = True
    t0 = env.clock.monotonic()
    assert await _write(wh, [b"1", b"2", b"3"]) == [1, 2, 3]
    assert env.clock.monotonic() - t0 >= env.config.add_timeout_ms / 1000.0
    assert silent not in wh.metadata.ensembles[-1][1]
    assert wh.metadata.ensembles[-1][0] == 1


@virtual_time
async def test_failures_during_a_change_are_handled_in_turn() -> None:
    env = await make_env(6)
    wh = await env.bk.create_ledger(3, 3, 2)
    await _write(wh, [b"x"] * 3)
    a, b, _ = wh.metadata.ensembles[0][1]
    env.pool[a].crash()
    env.pool[b].crash()
    assert await _write(wh, [b"y%d" % i for i in range(10)]) == list(range(3, 13))
    last = wh.metadata.ensembles[-1][1]
    assert a not in last and b not in last
    assert [e.data for e in await wh.read(3, 12)] == [b"y%d" % i for i in range(10)]


@virtual_time
async def test_no_replacement_breaks_the_handle_with_not_enough_bookies() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 3)
    await wh.add_entry(b"ok")
    env.pool[wh.metadata.ensembles[0][1][2]].crash()
    with pytest.raises(api.NotEnoughBookiesError):
        await wh.add_entry(b"stuck")
    with pytest.raises(api.NotEnoughBookiesError):
        await wh.add_entry(b"after")
    # the confirmed entry survives: a recovering reader closes the ledger at 0 or 1
    env.pool[wh.metadata.ensembles[0][1][2]].restart()
    reader = await env.client().open_ledger(wh.ledger_id)
    assert reader.last_add_confirmed >= 0
    assert (await reader.read(0, 0))[0].data == b"ok"


@virtual_time
async def test_transient_add_failure_is_replaced_and_data_stays_in_order() -> None:
    env = await make_env(5)
    wh = await env.bk.create_ledger(3, 2, 2)
    flaky = wh.metadata.ensembles[0][1][0]
    env.pool[flaky].fail_adds = 1
    datas = [b"%03d" % i for i in range(50)]
    assert await _write(wh, datas) == list(range(50))
    assert [e.data for e in await wh.read(0, 49)] == datas
    assert flaky not in wh.metadata.ensembles[-1][1]


@virtual_time
async def test_a_bookie_that_failed_is_quarantined_from_replacements() -> None:
    env = await make_env(5, config=replace(FAST, bookie_quarantine_ms=10_000))
    wh = await env.bk.create_ledger(3, 3, 3)
    first = wh.metadata.ensembles[0][1]
    spare = sorted(set(env.pool.bookies) - set(first))
    flaky = first[0]
    env.pool[flaky].fail_adds = 1
    await wh.add_entry(b"0")  # flaky is replaced by one of the spares
    assert flaky not in wh.metadata.ensembles[-1][1]
    assert flaky in env.bk.ctx.registry.quarantined()
    # the next failure must not bring flaky back while it is quarantined
    second = next(b for b in wh.metadata.ensembles[-1][1] if b in first)
    env.pool[second].crash()
    await wh.add_entry(b"1")
    last = wh.metadata.ensembles[-1][1]
    assert flaky not in last and second not in last
    assert set(last) >= set(spare)
    await asyncio.sleep(11)
    assert flaky not in env.bk.ctx.registry.quarantined()
