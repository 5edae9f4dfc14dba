"""Placement policies, the bookie registry and the metadata CAS loop."""

from __future__ import annotations

from dataclasses import replace

import pytest
from bk_helpers import make_env

from magnetar.bookie.api import READONLY_PATH, ledger_path
from magnetar.bookkeeper import api
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.metadata import LedgerMetadataStore, with_fragment
from magnetar.bookkeeper.placement import DefaultPlacementPolicy, RackAwarePlacementPolicy
from magnetar.runtime import Rng
from magnetar.testing.clock import virtual_time
from magnetar.testing.faults import FaultPlan
from magnetar.testing.metadata_faults import FaultInjectingMetadataStore

BOOKIES = [f"b{i}" for i in range(6)]
RACKS = {"b0": "/r1", "b1": "/r1", "b2": "/r2", "b3": "/r2", "b4": "/r3", "b5": "/r3"}


def _write_sets(ensemble: tuple[str, ...], qw: int) -> list[list[str]]:
    n = len(ensemble)
    return [[ensemble[(i + k) % n] for k in range(qw)] for i in range(n)]


@pytest.mark.parametrize("seed", range(30))
def test_rack_aware_spreads_every_write_set_across_racks(seed: int) -> None:
    policy = RackAwarePlacementPolicy(Rng(seed))
    for e, qw in ((3, 3), (3, 2), (4, 2), (6, 3), (5, 2)):
        ens = policy.new_ensemble(e, qw, BOOKIES, RACKS, set())
        assert len(set(ens)) == e
        for ws in _write_sets(ens, qw):
            assert len({RACKS[b] for b in ws}) == len(ws), (e, qw, ens)


def test_rack_aware_degrades_when_racks_are_too_few() -> None:
    racks = {b: "/only" for b in BOOKIES}
    ens = RackAwarePlacementPolicy(Rng(1)).new_ensemble(3, 2, BOOKIES, racks, set())
    assert len(set(ens)) == 3


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_replacement_keeps_write_sets_on_distinct_racks(seed: int) -> None:
    policy = RackAwarePlacementPolicy(Rng(seed))
    ens = list(policy.new_ensemble(3, 2, BOOKIES, RACKS, set()))
    failed = ens[1]
    ens[1] = policy.replace_bookie(ens, 1, 2, BOOKIES, RACKS, {failed})
    assert failed not in ens and len(set(ens)) == 3
    for ws in _write_sets(tuple(ens), 2):
        assert len({RACKS[b] for b in ws}) == 2


def test_default_policy_is_seeded_and_excludes() -> None:
    a = DefaultPlacementPolicy(Rng(5)).new_ensemble(3, 2, BOOKIES, {}, {"b0"})
    b = DefaultPlacementPolicy(Rng(5)).new_ensemble(3, 2, BOOKIES, {}, {"b0"})
    assert a == b and "b0" not in a
    with pytest.raises(api.NotEnoughBookiesError):
        DefaultPlacementPolicy(Rng(5)).replace_bookie(BOOKIES[:3], 0, 2, BOOKIES[:3], {}, set())


@virtual_time
async def test_client_uses_racks_from_metadata_and_skips_read_only_bookies() -> None:
    env = await make_env(6, config=ClientConfig(placement_policy="rack_aware"))
    ids = sorted(env.pool.bookies)
    racks = {b: f"/rack{i // 2}" for i, b in enumerate(ids)}
    await env.pool.register(env.server.session(), only=[], racks=racks)
    await env.server.session().put(f"{READONLY_PATH}/{ids[0]}", b"", ephemeral=True)
    bk = env.client(9)
    for _ in range(10):
        wh = await bk.create_ledger(3, 3, 2)
        ens = wh.metadata.ensembles[0][1]
        assert ids[0] not in ens
        assert len({racks[b] for b in ens}) == 3


@virtual_time
async def test_metadata_update_retries_on_concurrent_change() -> None:
    env = await make_env(3)
    store = env.server.session()
    ledgers = LedgerMetadataStore(store)
    md, version = await ledgers.create(
        lambda lid: api.LedgerMetadata(lid, 3, 2, 2, api.LedgerState.OPEN, ((0, ("a", "b", "c")),))
    )
    # someone else updates first: our stale version fails CAS, the loop re-reads and re-applies
    await ledgers.update(md.ledger_id, lambda m: replace(m, custom_metadata={"other": b"1"}))
    calls = []

    def add_fragment(m: api.LedgerMetadata) -> api.LedgerMetadata:
        calls.append(m.custom_metadata)
        return with_fragment(m, 5, ("a", "b", "d"))

    new, new_version = await ledgers.update(md.ledger_id, add_fragment, known=(md, version))
    assert len(calls) == 2 and calls[1] == {"other": b"1"}
    assert new.custom_metadata == {"other": b"1"} and new.ensembles[-1] == (5, ("a", "b", "d"))
    got = await store.get(ledger_path(md.ledger_id))
    assert got is not None and got.stat.version == new_version


def test_with_fragment_replaces_and_merges() -> None:
    md = api.LedgerMetadata(1, 3, 2, 2, api.LedgerState.OPEN, ((0, ("a", "b", "c")),))
    md2 = with_fragment(md, 4, ("a", "b", "d"))
    assert md2.ensembles == ((0, ("a", "b", "c")), (4, ("a", "b", "d")))
    md3 = with_fragment(md2, 4, ("a", "e", "d"))  # a second change at the same entry replaces it
    assert md3.ensembles == ((0, ("a", "b", "c")), (4, ("a", "e", "d")))
    md4 = with_fragment(md3, 4, ("a", "b", "c"))  # back to the previous ensemble: one fragment
    assert md4.ensembles == ((0, ("a", "b", "c")),)


@virtual_time
async def test_writes_whose_answer_is_lost_are_recognised() -> None:
    """ZooKeeper's "did my write happen?": the put is applied but the client sees ConnectionLoss."""
    env = await make_env(5)
    plan = FaultPlan(Rng(1))
    store = FaultInjectingMetadataStore(env.server.session(), plan, clock=env.clock)
    bk = BookKeeperClient(store, env.pool, env.clock, Rng(2), env.config)
    wh = await bk.create_ledger(3, 3, 3)
    await wh.add_entry(b"0")
    path = ledger_path(wh.ledger_id)
    plan.drop("put", path, times=1)  # the ensemble change's CAS is applied, its answer lost
    env.pool[wh.metadata.ensembles[0][1][0]].crash()
    assert await wh.add_entry(b"1") == 1
    stored = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert len(stored.ensembles) == 2 and stored.ensembles == wh.metadata.ensembles
    plan.drop("put", path, times=1)  # and the close's
    await wh.close()
    stored = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert stored.is_closed and stored.last_entry_id == 1
    assert plan.statistics()["fired"] == 2
