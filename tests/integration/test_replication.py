"""Replication with real processes: bookies die, writes go on, auto-recovery heals.

Four `magnetar bookie` subprocesses share a real ZooKeeper with this test's
ledger client (over TCP, the bookie wire protocol).  Ledgers are E=3 Qw=2
Qa=2, so the fourth bookie is the spare an ensemble change needs: with only
three bookies a lost one could not be replaced in an ensemble of three.

During a stream of pipelined adds to several ledgers one bookie is killed
with SIGKILL.  Every add must still be acknowledged (ensemble change), and
everything acknowledged must read back.  Then an auto-recovery service (the
elected auditor plus a replication worker) notices the lost bookie once its
ZooKeeper session expires and re-replicates; the test waits until no ledger
is marked under-replicated and no metadata names the dead bookie, and then
reads every entry of every fragment directly from *each* bookie the metadata
names for it, checking digest and bytes: every entry is back on Qw=2
replicas.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from bookie_proc import BookieProcess, free_port, start_bookie

from magnetar.bookie.api import AVAILABLE_PATH
from magnetar.bookie.entry_format import decode_entry
from magnetar.bookie.wire_client import WireBookieClient, WireBookieClientPool
from magnetar.bookkeeper.autorecovery import AutoRecovery
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.underreplication import UnderReplicationManager
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock, Rng
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 - fixture

pytestmark = pytest.mark.zookeeper

CONFIG = ClientConfig(
    add_timeout_ms=3_000,
    read_timeout_ms=3_000,
    speculative_read_timeout_ms=300,
    ensemble_change_backoff_ms=300,
    ensemble_change_attempts_max=10,
    bookie_list_refresh_ms=500,
    replication_poll_interval_ms=300,
)
LEDGERS = 3
ENTRIES = 400
KILL_AFTER = 120


async def _wait_until(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@pytest.fixture
async def cluster(tmp_path, zookeeper_server):  # type: ignore[no-untyped-def]
    meta_url = f"{zookeeper_server.url}/replication-{time.time_ns()}"
    conf = tmp_path / "bookie.conf"
    conf.write_text("journalMaxGroupWaitMSec=1\nflushInterval=500\n")
    bookies: list[BookieProcess] = []
    stores = []
    try:
        for i in range(4):
            bookies.append(
                await start_bookie(str(tmp_path / f"b{i}"), free_port(), meta_url, config=str(conf))
            )

        async def store():  # type: ignore[no-untyped-def]
            s = await create_metadata_store(meta_url, clock=RealClock(), session_timeout_ms=4_000)
            stores.append(s)
            return s

        yield bookies, store
    finally:
        for s in stores:
            await s.aclose()
        for b in bookies:
            if b.proc.returncode is None:
                await b.kill9()


async def test_bookie_killed_during_writes_then_auto_recovery_restores_two_replicas(cluster) -> None:  # type: ignore[no-untyped-def]
    bookies, open_store = cluster
    store = await open_store()
    await _wait_until(lambda: _count_available(store, 4), 30, "four bookies registered in ZooKeeper")
    pool = WireBookieClientPool(timeout_ms=5_000, connect_timeout_ms=1_000)
    bk = BookKeeperClient(store, pool, RealClock(), Rng(7), CONFIG)
    rng = Rng(11)
    handles = [await bk.create_ledger(3, 2, 2) for _ in range(LEDGERS)]
    # the victim is in the first ledger's ensemble (and so in most others: 3 of 4 bookies each)
    victim_id = handles[0].metadata.ensembles[0][1][1]
    victim = next(b for b in bookies if b.bookie_id == victim_id)
    written: dict[int, list[bytes]] = {h.ledger_id: [] for h in handles}
    killed = asyncio.Event()

    async def write(h) -> None:  # type: ignore[no-untyped-def]
        pending = []
        for i in range(ENTRIES):
            data = b"L%d-E%d-" % (h.ledger_id, i) + rng.randbytes(rng.randint(10, 2000))
            written[h.ledger_id].append(data)
            pending.append(asyncio.ensure_future(h.add_entry(data)))
            if len(pending) >= 16:
                await pending.pop(0)
            if i == KILL_AFTER and not killed.is_set():
                killed.set()
                await victim.kill9()
            await asyncio.sleep(0)
        ids = [await p for p in pending]
        assert ids[-1] == ENTRIES - 1

    await asyncio.wait_for(asyncio.gather(*(write(h) for h in handles)), 120)
    assert killed.is_set()
    changed = 0
    for h in handles:
        assert h.last_add_confirmed == ENTRIES - 1
        if victim_id in h.metadata.ensembles[0][1]:
            assert victim_id not in h.metadata.ensembles[-1][1]
            changed += 1
        await h.close()
    assert changed >= 1

    # every acknowledged entry reads back (a fresh client, recovery open of closed ledgers)
    reader_store = await open_store()
    reader = BookKeeperClient(
        reader_store, WireBookieClientPool(timeout_ms=5_000), RealClock(), Rng(8), CONFIG
    )
    for h in handles:
        rh = await reader.open_ledger(h.ledger_id)
        assert rh.last_add_confirmed == ENTRIES - 1
        got = await rh.read(0, ENTRIES - 1)
        assert [e.data for e in got] == written[h.ledger_id]

    # auto-recovery: auditor + worker in one service with its own session
    ar_store = await open_store()
    ar_client = BookKeeperClient(
        ar_store, WireBookieClientPool(timeout_ms=5_000), RealClock(), Rng(9), CONFIG
    )
    service = AutoRecovery(ar_client, ar_store, "autorecovery-1")
    await service.start()
    marks = UnderReplicationManager(store)

    async def healed() -> bool:
        if await marks.marked():
            return False
        for h in handles:
            md = await bk.get_ledger_metadata(h.ledger_id)
            if any(victim_id in ens for _, ens in md.ensembles):
                return False
        return True

    try:
        await _wait_until(healed, 90, "auto-recovery to re-replicate every fragment of the dead bookie")
        assert service.auditor.is_leader
        assert service.worker.replicated_fragments >= changed
    finally:
        await service.aclose()

    # read each fragment from each bookie the metadata names: two verified replicas per entry
    direct: dict[str, WireBookieClient] = {}
    try:
        for h in handles:
            md = await bk.get_ledger_metadata(h.ledger_id)
            assert md.is_closed and md.last_entry_id == ENTRIES - 1
            for e in range(ENTRIES):
                replicas = md.write_set(e)
                assert len(set(replicas)) == 2 and victim_id not in replicas
                for b in replicas:
                    if b not in direct:
                        host, port = b.rsplit(":", 1)
                        direct[b] = WireBookieClient(b, host, int(port), timeout_ms=5_000)
                    raw = await direct[b].read_entry(md.ledger_id, e)
                    _, payload = decode_entry(raw, md.ledger_id, e)
                    assert payload == written[h.ledger_id][e], f"ledger {md.ledger_id} entry {e} on {b}"
    finally:
        for c in direct.values():
            await c.aclose()
        for c in (bk, reader, ar_client):
            await c.aclose()
        await pool.aclose()
    for b in bookies:
        if b is not victim:
            assert await b.terminate() == 0


async def _count_available(store, n: int) -> bool:  # type: ignore[no-untyped-def]
    names = [c for c in await store.children(AVAILABLE_PATH) if c != "readonly"]
    return len(names) >= n
