"""Issue 17, bookies join and leave, on real processes.

ZooKeeper, two bookies (a third planned but held back), one broker and one
``magnetar autorecovery`` process, started by
:class:`~magnetar.testing.cluster.ClusterProcesses`; the broker writes at E/Qw/Qa 2/2/2
and rolls a ledger every 20 entries.  The auditor's own delay is an hour, so only the
decommission command can start re-replication here.

1. The official client produces; the ledgers are on bookie-0 and bookie-1.
2. bookie-2 joins.  ``magnetar bookie decommission`` of a running bookie is refused.
3. bookie-0 is stopped; the client keeps producing: the broker's ensemble changes put the
   new entries on the joiner (the only other writable bookie), and new ledgers too.
4. ``magnetar bookie decommission --bookie-id <bookie-0>``: the command marks bookie-0's
   ledgers, the auto-recovery worker copies them, and it exits 0 once no ledger's metadata
   names bookie-0; its cookie is gone.
5. Every message is consumed (a new subscription from the earliest), and every entry of
   every closed ledger is read directly from each bookie of its write set.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid

import pytest

from magnetar.bookie.api import COOKIES_PATH
from magnetar.bookie.wire_client import WireBookieClient
from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock
from magnetar.testing.cluster import ClusterProcesses, serving_cluster
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]
TOPIC = f"persistent://public/default/decommission-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def cluster(tmp_path, zookeeper_server):
    yield from serving_cluster(
        tmp_path / "cluster",
        brokers=1,
        bookies=3,
        held=("bookie-2",),
        autorecovery=True,
        cluster_name="decom",
        broker_properties={
            "managedLedgerDefaultEnsembleSize": "2",
            "managedLedgerDefaultWriteQuorum": "2",
            "managedLedgerDefaultAckQuorum": "2",
            "managedLedgerMaxEntriesPerLedger": "20",
            "managedLedgerMinLedgerRolloverTimeMinutes": "0",
        },
        bookie_properties={
            "zkTimeout": "4000",
            "lostBookieRecoveryDelay": "3600",
            "auditorPeriodicCheckInterval": "3600",
            "openLedgerRereplicationGracePeriod": "1000",
        },
        zookeeper_url=zookeeper_server.url,  # the run's ZooKeeper; the cluster has its own chroot
    )


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


async def _all_ledgers(url: str) -> dict[int, object]:
    store = await create_metadata_store(url, clock=RealClock())
    try:
        ml = LedgerMetadataStore(store)
        out = {}
        for lid in await ml.list_ids():
            out[lid] = (await ml.read(lid))[0]
        return out
    finally:
        await store.aclose()


async def _cookie(url: str, bookie_id: str) -> bool:
    store = await create_metadata_store(url, clock=RealClock())
    try:
        return await store.get(f"{COOKIES_PATH}/{bookie_id}") is not None
    finally:
        await store.aclose()


async def _read_direct(ledgers: dict, bookie_ids: set[str]) -> int:
    """Every entry of every closed ledger, from each bookie of its write set."""
    clients = {}
    n = 0
    try:
        for lid, md in ledgers.items():
            if not md.is_closed:
                continue
            for e in range(md.last_entry_id + 1):
                for b in md.write_set(e):
                    assert b in bookie_ids, (lid, e, b)
                    if b not in clients:
                        host, port = b.rsplit(":", 1)
                        clients[b] = WireBookieClient(b, host, int(port), timeout_ms=5_000)
                    assert await clients[b].read_entry(lid, e), (lid, e, b)
                    n += 1
    finally:
        for cl in clients.values():
            await cl.aclose()
    return n


def decommission(c: ClusterProcesses, bookie_id: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "magnetar.cli.main", "bookie", "decommission", "--bookie-id", bookie_id]
    cmd += ["--metadata-url", c.metadata_url, "--timeout", str(timeout), "--poll-interval", "0.5"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)


def produce(producer, start: int, n: int) -> list[str]:  # noqa: ANN001
    sent = [f"m-{i}" for i in range(start, start + n)]
    for s in sent:
        producer.send(s.encode())
    return sent


def test_bookie_joins_then_one_is_decommissioned_with_every_message_kept(cluster: ClusterProcesses) -> None:
    c = cluster
    b0, b1 = c.ready["bookie-0"][0], c.ready["bookie-1"][0]
    client = pulsar.Client(c.service_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=60_000)
        sent = produce(producer, 0, 60)
        before = run(_all_ledgers(c.metadata_url))
        assert before and all({b0, b1} == set(md.ensembles[0][1]) for md in before.values()), before

        # a bookie joins; a running bookie cannot be decommissioned
        c.start_held("bookie-2")
        b2 = c.ready["bookie-2"][0]
        refused = decommission(c, b1, timeout=5)
        assert refused.returncode == 1 and "still running" in refused.stderr, refused

        # bookie-0 leaves: stopped, then decommissioned while the client keeps producing
        assert c.terminate("bookie-0") == 0
        sent += produce(producer, 60, 60)
        t0 = time.monotonic()
        done = decommission(c, b0)
        took = time.monotonic() - t0
        assert done.returncode == 0, (done.stdout, done.stderr, c.log("autorecovery"))
        assert f"bookie {b0} decommissioned" in done.stdout, done.stdout
        print(done.stdout.strip().splitlines()[-1], f"(command {took:.1f} s)")
        sent += produce(producer, 120, 20)

        after = run(_all_ledgers(c.metadata_url))
        named = {lid for lid, md in after.items() if any(b0 in ens for _, ens in md.ensembles)}
        assert not named, f"ledgers still naming {b0}: {named}"
        assert not run(_cookie(c.metadata_url, b0))
        # the joiner holds the copies of bookie-0's fragments and the new ledgers' entries
        new_ledgers = [md for lid, md in after.items() if lid not in before]
        assert new_ledgers and all(b2 in md.ensembles[-1][1] for md in new_ledgers), new_ledgers
        moved = [lid for lid in before if b2 in {b for _, ens in after[lid].ensembles for b in ens}]
        assert moved, "no fragment of the old ledgers was copied to the joiner"
        assert run(_read_direct(after, {b1, b2})) > 0

        consumer = client.subscribe(
            TOPIC, "after-decommission", initial_position=pulsar.InitialPosition.Earliest
        )
        got = []
        while len(got) < len(sent):
            msg = consumer.receive(timeout_millis=30_000)
            got.append(msg.data().decode())
            consumer.acknowledge(msg)
        assert got == sent
    finally:
        client.close()
