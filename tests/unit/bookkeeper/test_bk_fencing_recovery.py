"""Fencing and recovery over fake bookies."""

from __future__ import annotations

import asyncio

import pytest
from bk_helpers import make_env

from magnetar.bookie.entry_format import encode_entry
from magnetar.bookkeeper import api
from magnetar.bookkeeper.recovery import has_ack_quorum_coverage
from magnetar.testing.clock import virtual_time


@virtual_time
async def test_recovery_fences_the_writer_and_keeps_every_acknowledged_entry() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 2, 2)
    acked = [b"m%d" % i for i in range(25)]
    for d in acked:
        await wh.add_entry(d)
    rh = await env.client().open_ledger(wh.ledger_id, recovery=True)
    md = rh.metadata
    assert md.state is api.LedgerState.CLOSED
    assert md.last_entry_id == 24 and rh.length == sum(map(len, acked))
    with pytest.raises(api.LedgerFencedError):
        await wh.add_entry(b"too late")
    with pytest.raises(api.LedgerFencedError):
        await wh.add_entry(b"still too late")
    assert [e.data for e in await rh.read(0, 24)] == acked
    # no bookie accepted a normal add after it was fenced
    for bookie in env.pool.bookies.values():
        assert not [a for a in bookie.accepted_adds if a[3] and not a[2]]
    with pytest.raises(api.LedgerFencedError):
        await wh.close()


@virtual_time
async def test_pipelined_writer_loses_nothing_it_was_told_about() -> None:
    env = await make_env(4)
    wh = await env.bk.create_ledger(3, 3, 2)
    acked: dict[int, bytes] = {}

    async def add(i: int) -> None:
        try:
            eid = await wh.add_entry(b"p%d" % i)
        except api.LedgerFencedError:
            return
        acked[eid] = b"p%d" % i

    for b in env.pool.bookies.values():
        b.add_delay_s = 0.01
    tasks = []
    recovering = None
    for i in range(200):  # one add every millisecond; a recovery starts in the middle
        tasks.append(asyncio.ensure_future(add(i)))
        if i == 60:
            recovering = asyncio.ensure_future(env.client().open_ledger(wh.ledger_id))
        await asyncio.sleep(0.001)
    await asyncio.gather(*tasks)
    assert recovering is not None
    rh = await recovering
    assert acked, "some adds were acknowledged before the fence"
    assert max(acked) <= rh.last_add_confirmed
    got = await rh.read(0, rh.last_add_confirmed)
    for e in got:
        assert e.data == b"p%d" % e.entry_id  # what the writer pushed for that id, in order
    for eid, data in acked.items():
        assert got[eid].data == data


@virtual_time
async def test_recovery_finds_entries_past_the_lac_and_rewrites_them_to_a_full_quorum() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 2)
    for i in range(5):
        await wh.add_entry(b"e%d" % i)
    # entry 5 reached only one bookie (the writer died before the others got it)
    lid = wh.ledger_id
    only = wh.metadata.write_set(5)[0]
    framed = encode_entry(lid, 5, 4, 2 * 5 + 2, b"e5")
    await env.pool.get(only).add_entry(lid, 5, b"", framed)
    rh = await env.client().open_ledger(lid)
    assert rh.metadata.last_entry_id == 5
    assert rh.metadata.length == 12
    assert (await rh.read(5, 5))[0].data == b"e5"
    assert env.holders(lid, 5) == sorted(rh.metadata.write_set(5))


@virtual_time
async def test_recovery_of_an_empty_ledger_closes_it_at_minus_one() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 2, 2)
    rh = await env.client().open_ledger(wh.ledger_id)
    assert rh.metadata.is_closed and rh.metadata.last_entry_id == -1 and rh.length == 0
    with pytest.raises(api.LedgerFencedError):
        await wh.add_entry(b"x")  # fencing created the ledger state on the bookies


@virtual_time
async def test_recovery_without_ack_quorum_coverage_fails_retriably() -> None:
    env = await make_env(4)
    wh = await env.bk.create_ledger(3, 3, 2)
    await wh.add_entry(b"a")
    ens = wh.metadata.ensembles[0][1]
    env.pool[ens[0]].crash()
    env.pool[ens[1]].crash()
    with pytest.raises(api.LedgerRecoveryError) as info:
        await env.client().open_ledger(wh.ledger_id)
    assert info.value.retriable
    env.pool[ens[0]].restart()
    rh = await env.client().open_ledger(wh.ledger_id)  # now 2 of 3 answer: covered
    assert rh.metadata.last_entry_id == 0
    assert ens[1] not in rh.metadata.ensemble_for(0) or rh.metadata.ensembles[-1][0] > 0


@virtual_time
async def test_recovery_replaces_a_dead_bookie_while_rewriting() -> None:
    env = await make_env(4)
    wh = await env.bk.create_ledger(3, 3, 2)
    for i in range(4):
        await wh.add_entry(b"r%d" % i)
    dead = wh.metadata.ensembles[0][1][2]
    env.pool[dead].crash()
    rh = await env.client().open_ledger(wh.ledger_id)
    md = rh.metadata
    assert md.last_entry_id == 3
    assert [e.data for e in await rh.read(0, 3)] == [b"r%d" % i for i in range(4)]
    # the rewritten tail lives on a new fragment without the dead bookie
    assert dead not in md.ensemble_for(3)


@virtual_time
async def test_second_recovery_of_a_closed_ledger_is_a_no_op() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 2, 2)
    await wh.add_entry(b"z")
    a = await env.client().open_ledger(wh.ledger_id)
    b = await env.client(5).open_ledger(wh.ledger_id)
    assert a.metadata == b.metadata


@virtual_time
async def test_concurrent_recoveries_agree_on_the_last_entry() -> None:
    env = await make_env(5)
    wh = await env.bk.create_ledger(3, 2, 2)
    for i in range(7):
        await wh.add_entry(b"c%d" % i)
    results = await asyncio.gather(
        *(env.client(10 + i).open_ledger(wh.ledger_id) for i in range(3)), return_exceptions=True
    )
    closed = [r.metadata.last_entry_id for r in results if not isinstance(r, BaseException)]
    assert closed and set(closed) == {6}


def test_ack_quorum_coverage_rule() -> None:
    md = api.LedgerMetadata(1, 3, 3, 2, api.LedgerState.OPEN, ((0, ("a", "b", "c")),))
    ens = ("a", "b", "c")
    assert has_ack_quorum_coverage(md, ens, {"a", "b"})
    assert not has_ack_quorum_coverage(md, ens, {"a"})
    md2 = api.LedgerMetadata(1, 3, 2, 2, api.LedgerState.OPEN, ((0, ens),))
    assert has_ack_quorum_coverage(md2, ens, {"a", "b"})  # each write set of 2 has one answer
    assert not has_ack_quorum_coverage(md2, ens, {"a"})  # write set (b, c) has none


@virtual_time
async def test_a_failed_recovery_leaves_metadata_on_the_original_ensemble() -> None:
    """Regression (found by simulation seed 2949): a recovery that changed the ensemble while
    rewriting the tail and then failed must not leave that ensemble in the metadata, or the
    next recovery reads the tail from bookies that got only part of it and drops acked entries."""
    env = await make_env(4)
    wh = await env.bk.create_ledger(2, 2, 2)
    datas = [b"t%d" % i for i in range(10)]
    assert await asyncio.gather(*(wh.add_entry(d) for d in datas)) == list(range(10))  # all carry LAC -1
    a, b = wh.metadata.ensembles[0][1]
    c, d = sorted(set(env.pool.bookies) - {a, b})
    env.pool[a].crash()
    env.pool[d].crash()
    env.pool[c].accept_adds_max = 3  # the replacement gives out part-way through the rewrite
    with pytest.raises(api.BKError):
        await env.client(3).open_ledger(wh.ledger_id)
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert md.state is api.LedgerState.IN_RECOVERY and md.ensembles == ((0, (a, b)),)
    env.pool[b].crash()  # now only the original ensemble's a holds the whole tail
    env.pool[a].restart()
    env.pool[d].restart()
    rh = await env.client(4).open_ledger(wh.ledger_id)
    assert rh.metadata.last_entry_id == 9
    assert [e.data for e in await rh.read(0, 9)] == datas
