"""A namespace's bookie affinity groups also hold when a bookie of its ledger is replaced.

Five fake bookies: three in group ``ga``, two in ``gb``.  Ledgers created with the
``ga`` placement config (what a namespace's ``bookieAffinityGroup`` asks) start on ``ga``;
then a bookie of theirs is lost.  The writer's ensemble change (an open ledger) and
auto-recovery's re-replication (a closed one) must both take the last ``ga`` bookie, never
a ``gb`` one (without the rule each pick had two chances in three to leave the group).
"""

from __future__ import annotations

import json
from dataclasses import replace

from bk_helpers import FAST, make_env

from magnetar.bookkeeper.isolation import BOOKIE_GROUPS_PATH, PLACEMENT_CONFIG_KEY, placement_config
from magnetar.bookkeeper.replication_worker import ReplicationWorker
from magnetar.bookkeeper.underreplication import UnderReplicationManager
from magnetar.testing.clock import virtual_time
from magnetar.testing.fake_bookie import FakeBookiePool

CFG = replace(FAST, replication_poll_interval_ms=100)
LEDGERS = 6


async def _env():  # type: ignore[no-untyped-def]
    env = await make_env(0, config=CFG)
    env.pool = FakeBookiePool.of(5, env.clock)
    env.bk = env.client(1)
    registrar = env.server.session()
    await env.pool.register(registrar)
    ids = sorted(env.pool.bookies)
    groups = {"ga": {b: {"rack": "/ga"} for b in ids[:3]}, "gb": {b: {"rack": "/gb"} for b in ids[3:]}}
    await registrar.put(BOOKIE_GROUPS_PATH, json.dumps(groups).encode(), -1)
    return env, registrar, set(ids[:3])


@virtual_time
async def test_ensemble_change_and_rereplication_stay_in_the_group() -> None:
    env, registrar, ga = await _env()
    meta = {PLACEMENT_CONFIG_KEY: placement_config(["ga"], [])}
    closed, open_ = [], []
    for i in range(LEDGERS):
        h = await env.bk.create_ledger(2, 2, 2, custom_metadata=meta)
        assert set(h.metadata.ensembles[0][1]) <= ga
        for e in range(5):
            await h.add_entry(b"e%d" % e)
        if i % 2:
            await h.close()
            closed.append(h)
        else:
            open_.append(h)
    # one ga bookie is lost: every ledger that used it must end on the two ga bookies left
    lost = sorted(ga)[0]
    env.pool[lost].crash()
    await FakeBookiePool.unregister(registrar, lost)
    env.bk.ctx.registry.invalidate()
    for h in open_:
        await h.add_entry(b"after")  # an ensemble change if the lost bookie was in it
        assert set(h.metadata.ensembles[-1][1]) == ga - {lost} or lost not in h.metadata.ensembles[0][1]
        assert all(set(ens) <= ga for _, ens in h.metadata.ensembles), h.metadata.ensembles
        assert lost not in h.metadata.ensembles[-1][1]
    store = env.server.session()
    marks = UnderReplicationManager(store)
    on_lost = [h.ledger_id for h in closed if lost in h.metadata.ensembles[0][1]]
    for lid in on_lost:
        await marks.mark(lid, [lost], 0)
    worker = ReplicationWorker(env.client(7).ctx, store, "worker-1")
    assert sorted(await worker.run_once()) == sorted(on_lost)
    for h in closed:
        md = await env.bk.get_ledger_metadata(h.ledger_id)
        assert all(set(ens) <= ga - {lost} for _, ens in md.ensembles), md.ensembles
    changed = sum(lost in h.metadata.ensembles[0][1] for h in open_) + len(on_lost)
    assert changed >= 2, "too few ledgers on the lost bookie to mean anything"
