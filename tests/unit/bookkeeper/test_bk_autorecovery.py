"""Auditor and replication workers over fake bookies."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from bk_helpers import FAST, Env, make_env

from magnetar.bookkeeper import api
from magnetar.bookkeeper.auditor import Auditor
from magnetar.bookkeeper.autorecovery import AutoRecovery
from magnetar.bookkeeper.replication_worker import ReplicationWorker
from magnetar.bookkeeper.underreplication import UnderReplicationManager
from magnetar.testing.clock import virtual_time
from magnetar.testing.fake_bookie import FakeBookiePool

CFG = replace(FAST, replication_poll_interval_ms=100, open_ledger_rereplication_grace_ms=2_000)


async def _lose(env: Env, registrar, bookie_id: str) -> None:  # type: ignore[no-untyped-def]
    env.pool[bookie_id].crash()
    await FakeBookiePool.unregister(registrar, bookie_id)


async def _env() -> tuple[Env, object]:
    env = await make_env(0, config=CFG)
    env.pool = FakeBookiePool.of(5, env.clock)
    env.bk = env.client(1)
    registrar = env.server.session()
    await env.pool.register(registrar)
    return env, registrar


def _assert_fully_replicated(env: Env, md: api.LedgerMetadata, lost: str) -> None:
    for _first, ensemble in md.ensembles:
        assert lost not in ensemble, md.ensembles
    for e in range(md.last_entry_id + 1):
        for b in md.write_set(e):
            assert env.pool[b].has_entry(md.ledger_id, e), (e, b)


@virtual_time
async def test_auditor_marks_and_worker_rereplicates_a_closed_ledger() -> None:
    env, registrar = await _env()
    wh = await env.bk.create_ledger(3, 2, 2)
    datas = [b"d%d" % i for i in range(30)]
    for d in datas:
        await wh.add_entry(d)
    await wh.close()
    other = await env.bk.create_ledger(2, 2, 2)  # maybe not on the lost bookie
    lost = wh.metadata.ensembles[0][1][0]
    await _lose(env, registrar, lost)
    store = env.server.session()
    auditor = Auditor(env.bk.ctx, store, "auditor-1")
    marked = await auditor.audit_once()
    assert wh.ledger_id in marked
    assert (other.ledger_id in marked) == (lost in other.metadata.ensembles[0][1])
    marks = UnderReplicationManager(store)
    assert await marks.lost_bookies(wh.ledger_id) == [lost]
    worker = ReplicationWorker(env.client(7).ctx, store, "worker-1")
    repaired = await worker.run_once()
    assert wh.ledger_id in repaired
    assert wh.ledger_id not in await marks.marked()
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    _assert_fully_replicated(env, md, lost)
    assert worker.replicated_entries == 20  # Qw/E of the 30 entries were on the lost bookie
    rh = await env.client(8).open_ledger(wh.ledger_id)
    assert [e.data for e in await rh.read(0, 29)] == datas


@virtual_time
async def test_lost_bookie_delay_waits_before_marking() -> None:
    env, registrar = await _env()
    cfg = replace(CFG, lost_bookie_recovery_delay_ms=5_000)
    bk = env.client(3)
    object.__setattr__(bk.ctx, "config", cfg)
    wh = await bk.create_ledger(3, 3, 3)
    await wh.add_entry(b"x")
    await wh.close()
    lost = wh.metadata.ensembles[0][1][1]
    await _lose(env, registrar, lost)
    auditor = Auditor(bk.ctx, env.server.session(), "a")
    assert await auditor.audit_once() == []
    await asyncio.sleep(2)
    assert await auditor.audit_once() == []
    await asyncio.sleep(3.5)
    assert await auditor.audit_once() == [wh.ledger_id]


@virtual_time
async def test_only_one_auditor_leads_and_a_follower_takes_over() -> None:
    env, _ = await _env()
    a = Auditor(env.client(3).ctx, env.server.session(), "a")
    b = Auditor(env.client(4).ctx, env.server.session(), "b")
    await a.start()
    await b.start()
    assert a.is_leader and not b.is_leader
    await a.aclose()
    await asyncio.sleep(0.5)
    assert b.is_leader
    await b.aclose()


@virtual_time
async def test_worker_repairs_closed_fragments_of_an_open_ledger_while_it_is_written() -> None:
    env, registrar = await _env()
    wh = await env.bk.create_ledger(3, 2, 2)
    for i in range(10):
        await wh.add_entry(b"a%d" % i)
    lost = wh.metadata.ensembles[0][1][2]
    await _lose(env, registrar, lost)
    for i in range(10):
        await wh.add_entry(b"b%d" % i)  # ensemble change: fragment 0 stays on the lost bookie
    assert len(wh.metadata.ensembles) == 2
    store = env.server.session()
    await Auditor(env.bk.ctx, store, "a").audit_once()
    worker = ReplicationWorker(env.client(5).ctx, store, "w")
    assert await worker.run_once() == [wh.ledger_id]
    for i in range(5):
        await wh.add_entry(b"c%d" % i)
    await wh.close()  # the writer's CAS merges with the worker's change
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert md.last_entry_id == 24
    _assert_fully_replicated(env, md, lost)


@virtual_time
async def test_open_ledger_with_a_dead_writer_is_fenced_after_the_grace_period() -> None:
    env, registrar = await _env()
    wh = await env.bk.create_ledger(3, 3, 2)
    for i in range(6):
        await wh.add_entry(b"o%d" % i)
    lost = wh.metadata.ensembles[0][1][0]
    await _lose(env, registrar, lost)  # and the writer is gone: no ensemble change happens
    store = env.server.session()
    await Auditor(env.bk.ctx, store, "a").audit_once()
    worker = ReplicationWorker(env.client(5).ctx, store, "w")
    assert await worker.run_once() == []  # within the grace period: left alone
    assert (await env.bk.get_ledger_metadata(wh.ledger_id)).state is api.LedgerState.OPEN
    await asyncio.sleep(2.5)
    await worker.run_once()  # fences and closes it
    assert await worker.run_once() == [wh.ledger_id]
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert md.is_closed and md.last_entry_id == 5
    _assert_fully_replicated(env, md, lost)


@virtual_time
async def test_autorecovery_service_heals_in_the_background() -> None:
    env, registrar = await _env()
    handles = []
    for _ in range(4):
        wh = await env.bk.create_ledger(3, 2, 2)
        for i in range(12):
            await wh.add_entry(b"%d" % i)
        await wh.close()
        handles.append(wh)
    services = [AutoRecovery(env.client(20 + i), env.server.session(), f"ar-{i}") for i in range(2)]
    for s in services:
        await s.start()
    lost = sorted(env.pool.bookies)[0]
    await _lose(env, registrar, lost)
    marks = UnderReplicationManager(env.server.session())
    for _ in range(100):
        await asyncio.sleep(0.2)
        mds = [await env.bk.get_ledger_metadata(h.ledger_id) for h in handles]
        if not await marks.marked() and all(lost not in e for md in mds for _, e in md.ensembles):
            break
    for md in mds:
        _assert_fully_replicated(env, md, lost)
    assert sum(s.auditor.is_leader for s in services) == 1
    for s in services:
        await s.aclose()


@virtual_time
async def test_the_audit_loop_skips_full_passes_while_nothing_changes() -> None:
    env, registrar = await _env()
    wh = await env.bk.create_ledger(3, 2, 2)
    await wh.add_entry(b"x")
    auditor = Auditor(env.bk.ctx, env.server.session(), "a")
    assert await auditor.audit_once(only_if_changed=True) == []
    assert await auditor.audit_once(only_if_changed=True) == []
    assert auditor.audits == 1
    await _lose(env, registrar, wh.metadata.ensembles[0][1][0])
    env.bk.ctx.registry.invalidate()
    assert await auditor.audit_once(only_if_changed=True) == [wh.ledger_id]
    assert auditor.audits == 2
