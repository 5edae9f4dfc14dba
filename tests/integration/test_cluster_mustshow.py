"""Issue 16's must-show on one real cluster: ZooKeeper, three bookies, three brokers, auto-recovery, the proxy.

Every piece is a real process on loopback, started by :class:`~magnetar.testing.cluster.ClusterProcesses`
(the config files and command lines of ``magnetar cluster up``), shared by the module's tests,
which run in file order: 100 topics through each broker's URL and through the proxy, owned by
several brokers; a bundle unloaded mid-stream; a broker paused past its ZooKeeper session
timeout (session lost, no restart); a bookie killed and its ledgers re-replicated by
auto-recovery; last, a broker killed with ``kill -9`` mid-stream with deduplication on.

Consumer-side redelivery after ``kill -9``: the official client groups acknowledgements for
100 ms (the C++ client's ``ackGroupingTimeMs``, not settable from Python) and never waits for a
receipt, so acks still in the client's group (or on the wire) when the broker dies are lost and
those messages come again -- as in Pulsar.  The broker then applies an ack at once but writes
the cursor's mark-delete at most ``managedLedgerDefaultMarkDeleteRateLimit`` times a second
(1.0, Pulsar's default), so acks applied since the last write also come again after the kill
(at-least-once, never a loss).  The test therefore asserts that no message whose
ack the consumer made more than ``ACK_WINDOW_S`` before the kill comes back, and prints how
many inside that window did.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid

import pytest

from magnetar.testing.cluster import ClusterProcesses, serving_cluster
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.streams import NumberedStream
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]
SESSION_TIMEOUT_MS = 2000
MARK_DELETE_RATE = 1.0  # managedLedgerDefaultMarkDeleteRateLimit, the brokers' default
# the client's 100 ms ack group, the wire, and one mark-delete write interval, with margin
ACK_WINDOW_S = 0.1 + 1 / MARK_DELETE_RATE + 0.4
CLUSTER = "mustshow"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper_server):
    yield from serving_cluster(
        tmp_path_factory.mktemp("mustshow"),
        brokers=3,
        bookies=3,
        proxy=True,
        autorecovery=True,
        cluster_name=CLUSTER,
        broker_properties={
            "metadataStoreSessionTimeoutMillis": str(SESSION_TIMEOUT_MS),
            "brokerDeduplicationEnabled": "true",
        },
        bookie_properties={
            "lostBookieRecoveryDelay": "1",
            "auditorPeriodicCheckInterval": "5",
            "openLedgerRereplicationGracePeriod": "1000",
        },
        zookeeper_url=zookeeper_server.url,  # the run's ZooKeeper; the cluster has its own chroot
    )


# ---------------------------------------------------------------- helpers
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


def http(method: str, url: str, body: object = None) -> tuple[int, object]:
    """One request, 307s followed for every method (as Pulsar's admin does)."""
    for _ in range(5):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.build_opener(_NoRedirect()).open(req, timeout=60) as resp:
                raw, status, location = resp.read(), resp.status, resp.headers.get("Location")
        except urllib.error.HTTPError as e:
            raw, status, location = e.read(), e.code, e.headers.get("Location")
        if status != 307:
            break
        url = location
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode()


def client(url: str):
    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def live_brokers(c: ClusterProcesses) -> list[int]:
    return [int(n.rsplit("-", 1)[1]) for n in c.names("broker") if c.running(n)]


def new_namespace(c: ClusterProcesses, bundles: int) -> str:
    ns = f"public/ms-{uuid.uuid4().hex[:6]}"
    status, body = http(
        "PUT",
        f"{c.web_url(live_brokers(c)[0])}/admin/v2/namespaces/{ns}",
        {"bundles": {"numBundles": bundles}},
    )
    assert status == 204, body
    return ns


def owner_index(c: ClusterProcesses, topic: str) -> int:
    status, data = http("GET", f"{c.web_url(live_brokers(c)[0])}/lookup/v2/topic/{topic.replace('://', '/')}")
    assert status == 200, data
    return next(i for i in live_brokers(c) if c.broker_url(i) == data["brokerUrl"])


def owned_bundles(c: ClusterProcesses, ns: str) -> dict[str, str]:
    """bundle range -> owner (broker id), from every live broker's ownedNamespaces; never two owners."""
    out: dict[str, str] = {}
    for i in live_brokers(c):
        broker_id = c.web_url(i).split("://", 1)[1]
        status, owned = http("GET", f"{c.web_url(i)}/admin/v2/brokers/{CLUSTER}/{broker_id}/ownedNamespaces")
        assert status == 200, owned
        for key in owned:
            name, _, rng = key.rpartition("/")
            if name == ns:
                assert rng not in out, f"bundle {rng} owned twice: {out[rng]} and {broker_id}"
                out[rng] = broker_id
    return out


async def _ledgers_of(metadata_url: str, ml_name: str | None) -> dict[int, list[list[str]]]:
    """ledger id -> its ensembles (bookie ids); a managed ledger's ledgers, or all with ``None``."""
    from magnetar.bookkeeper.metadata import LedgerMetadataStore
    from magnetar.managed_ledger.metadata import MLInfo, ledger_path
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await create_metadata_store(metadata_url, clock=RealClock())
    try:
        ledgers = LedgerMetadataStore(store)
        if ml_name is None:
            ids = await ledgers.list_ids()
        else:
            ids = [
                li.ledger_id for li in MLInfo.decode((await store.get(ledger_path(ml_name))).value).ledgers
            ]
        out = {}
        for lid in ids:
            md = (await ledgers.read(lid))[0]
            out[lid] = [list(ens) for _, ens in md.ensembles]
        return out
    finally:
        await store.aclose()


async def _ledger_states(metadata_url: str, ml_name: str) -> list[str]:
    """The state (OPEN/CLOSED) of each ledger of a managed ledger, oldest first."""
    from magnetar.bookkeeper.metadata import LedgerMetadataStore
    from magnetar.managed_ledger.metadata import MLInfo, ledger_path
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await create_metadata_store(metadata_url, clock=RealClock())
    try:
        info = MLInfo.decode((await store.get(ledger_path(ml_name))).value)
        ledgers = LedgerMetadataStore(store)
        return [(await ledgers.read(li.ledger_id))[0].state.name for li in info.ledgers]
    finally:
        await store.aclose()


async def _under_replicated(metadata_url: str) -> list[int]:
    from magnetar.bookkeeper.underreplication import UnderReplicationManager
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await create_metadata_store(metadata_url, clock=RealClock())
    try:
        return await UnderReplicationManager(store).marked()
    finally:
        await store.aclose()


def _topic_state(c: ClusterProcesses, topic: str) -> dict:
    """The topic's stats and internal stats on its owner (for a failure message)."""
    path = topic.replace("://", "/")
    web = c.web_url(live_brokers(c)[0])
    out = {}
    for what in ("stats", "internalStats"):
        status, body = http("GET", f"{web}/admin/v2/{path}/{what}")
        out[what] = body if status == 200 else (status, body)
    return out


# ---------------------------------------------------------------- (1) 100 topics, every URL
def test_100_topics_through_each_broker_and_the_proxy_owned_by_several(cluster):
    ns = new_namespace(cluster, bundles=16)
    topics = [f"persistent://{ns}/t{i}" for i in range(100)]
    urls = [cluster.broker_url(i) for i in range(3)] + [cluster.proxy_url]
    clients = [client(u) for u in urls]
    try:
        pairs = []
        for i, topic in enumerate(topics):  # topic i through URL i mod 4
            cl = clients[i % len(clients)]
            consumer = cl.subscribe(topic, "s")
            producer = cl.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=1)
            for j in range(5):
                producer.send_async(f"{i}-{j}".encode(), None)
            pairs.append((i, consumer, producer))
        for i, consumer, producer in pairs:
            producer.flush()
            got = [consumer.receive(timeout_millis=30_000).data() for _ in range(5)]
            assert got == [f"{i}-{j}".encode() for j in range(5)], (topics[i], urls[i % 4])
    finally:
        for cl in clients:
            cl.close()
    owned = owned_bundles(cluster, ns)
    assert len(set(owned.values())) >= 2, owned
    topic_owners = {owner_index(cluster, t) for t in topics[:30]}
    assert len(topic_owners) >= 2, topic_owners
    # what `magnetar cluster status` reads: three registered brokers, a leader, the same owners
    from magnetar.cli.cluster import read_cluster_metadata

    md = asyncio.run(read_cluster_metadata(cluster.metadata_url))
    assert sorted(md["brokers"]) == sorted(cluster.web_url(i).split("://", 1)[1] for i in range(3)), md
    assert md["leader"] is not None
    status_owners = {
        b.rsplit("/", 1)[1]: o["nativeUrl"] for b, o in md["bundles"].items() if b.startswith(ns)
    }
    assert set(status_owners) == set(owned) and len(set(status_owners.values())) >= 2, status_owners


# ---------------------------------------------------------------- (2) unload mid-stream
def test_bundle_unloaded_mid_stream_nothing_lost(cluster):
    ns = new_namespace(cluster, bundles=4)
    topic = f"persistent://{ns}/unload"
    stream = NumberedStream(cluster.service_url, topic)
    try:
        stream.wait_acked(100)
        before = owner_index(cluster, topic)
        status, rng = http(
            "GET", f"{cluster.web_url(before)}/lookup/v2/topic/{topic.replace('://', '/')}/bundle"
        )
        assert status == 200, rng
        other = next(i for i in live_brokers(cluster) if i != before)
        status, body = http("PUT", f"{cluster.web_url(other)}/admin/v2/namespaces/{ns}/{rng}/unload")
        assert status == 204, body
        stream.wait_acked(100)
    finally:
        stream.stop()
    assert stream.lost() == [], stream.explain()
    assert stream.stored_twice() == []
    print("unload: redelivered after the consumer acknowledged:", len(stream.redelivered))


# ---------------------------------------------------------------- (4) session loss, no restart
def test_broker_paused_past_its_session_timeout_comes_back_without_restart(cluster):
    ns = new_namespace(cluster, bundles=4)
    topic = f"persistent://{ns}/pause"
    stream = NumberedStream(cluster.service_url, topic)
    try:
        stream.wait_acked(50)
        victim = owner_index(cluster, topic)
        name = f"broker-{victim}"
        pid = cluster.pid(name)
        victim_id = cluster.web_url(victim).split("://", 1)[1]
        other = next(i for i in live_brokers(cluster) if i != victim)
        cluster.pause(name)
        try:
            time.sleep(SESSION_TIMEOUT_MS / 1000 * 2.5)  # ZooKeeper expires its session meanwhile
            status, listed = http("GET", f"{cluster.web_url(other)}/admin/v2/brokers/{CLUSTER}")
            assert status == 200 and victim_id not in listed, listed
        finally:
            cluster.resume(name)
        stream.wait_acked(50, timeout_s=60)
        deadline = time.monotonic() + 30
        while True:  # registered again on a fresh session, same process
            status, listed = http("GET", f"{cluster.web_url(other)}/admin/v2/brokers/{CLUSTER}")
            if status == 200 and victim_id in listed:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
    finally:
        stream.stop()
    assert cluster.running(name) and cluster.pid(name) == pid
    assert "ownership lost" in cluster.log(name, 400)
    assert stream.lost() == [], stream.explain()
    assert stream.stored_twice() == []


# ---------------------------------------------------------------- (5) bookie lost, re-replicated
def test_bookie_killed_and_its_ledgers_re_replicated(cluster):
    ns = new_namespace(cluster, bundles=4)
    status, body = http(  # keep every ledger, so the lost bookie's ones stay to be checked
        "POST",
        f"{cluster.web_url(live_brokers(cluster)[0])}/admin/v2/namespaces/{ns}/retention",
        {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
    )
    assert status == 204, body
    topic = f"persistent://{ns}/bk"
    ml_name = f"{ns}/persistent/bk"
    stream = NumberedStream(cluster.service_url, topic)
    try:
        stream.wait_acked(100)
        ensembles = asyncio.run(_ledgers_of(cluster.metadata_url, ml_name))
        on = {b for ens in ensembles.values() for e in ens for b in e}
        victim = next(n for n in cluster.names("bookie") if cluster.ready[n][0] in on)
        victim_id = cluster.ready[victim][0]
        before_on_victim = sorted(lid for lid, ens in ensembles.items() if any(victim_id in e for e in ens))
        cluster.kill(victim)
        stream.wait_acked(100, timeout_s=60)  # writes go on after an ensemble change
        # close the ledger (unload): a closed ledger is repaired without a grace period
        owner = owner_index(cluster, topic)
        status, rng = http(
            "GET", f"{cluster.web_url(owner)}/lookup/v2/topic/{topic.replace('://', '/')}/bundle"
        )
        status, body = http("PUT", f"{cluster.web_url(owner)}/admin/v2/namespaces/{ns}/{rng}/unload")
        assert status == 204, body
        stream.wait_acked(50, timeout_s=60)
    finally:
        stream.stop()
    assert stream.lost() == [], stream.explain()
    deadline = time.monotonic() + 150  # auto-recovery repairs every ledger of the lost bookie, one at a time
    while True:
        ensembles = asyncio.run(_ledgers_of(cluster.metadata_url, ml_name))
        left = {lid: ens for lid, ens in ensembles.items() if any(victim_id in e for e in ens)}
        if not left:
            break
        assert time.monotonic() < deadline, (
            f"ledgers still on {victim_id}: {left}\n{cluster.log('autorecovery', 60)}"
        )
        time.sleep(1)
    assert set(before_on_victim) <= set(ensembles), (before_on_victim, ensembles)
    # auto-recovery copied them (a writer's ensemble change never rewrites an old fragment)
    log = cluster.log("autorecovery", 400)
    assert all(f"replicated ledger {lid} " in log for lid in before_on_victim), (
        before_on_victim,
        log[-3000:],
    )
    # every fragment is back at two replicas, on live bookies
    live_ids = {cluster.ready[n][0] for n in cluster.names("bookie") if cluster.running(n)}
    assert all(len(e) == 2 and set(e) <= live_ids for ens in ensembles.values() for e in ens), ensembles
    print(
        "bookie loss: ledgers re-replicated:",
        sorted(ensembles),
        "marks left:",
        asyncio.run(_under_replicated(cluster.metadata_url)),
    )


# ---------------------------------------------------------------- (3) kill -9, dedup on
def test_broker_kill9_mid_stream_no_acknowledged_message_lost_none_returns(cluster):
    ns = new_namespace(cluster, bundles=4)
    topic = f"persistent://{ns}/kill"
    stream = NumberedStream(cluster.service_url, topic)
    try:
        stream.wait_acked(200)
        victim = owner_index(cluster, topic)
        before = asyncio.run(_ledger_states(cluster.metadata_url, f"{ns}/persistent/kill"))
        cluster.kill(f"broker-{victim}")
        t_kill = time.monotonic()
        stream.wait_acked(1, timeout_s=90)
        failover_s = time.monotonic() - t_kill
        stream.wait_acked(200)
    finally:
        stream.stop(on_loss=lambda: _topic_state(cluster, topic))
    assert owner_index(cluster, topic) != victim
    print(
        f"kill -9: first acknowledged send {failover_s:.2f} s later (session timeout {SESSION_TIMEOUT_MS} ms)"
    )
    dup_receipts = sum(1 for v in stream.acked if (stream.receipts.get(v) or "").startswith("(-1,-1"))
    print(
        f"kill -9: {len(stream.acked)} sends acknowledged ({dup_receipts} as duplicates), "
        f"{len(set(stream.received))} values consumed, receipts not consumed: {stream.receipts_not_consumed()[:5]}"
    )
    assert stream.lost() == [], stream.explain()
    assert stream.receipts_not_consumed() == [], stream.explain()
    assert stream.stored_twice() == []  # deduplication: no producer retry stored twice
    late = [v for v, at in stream.redelivered if at < t_kill - ACK_WINDOW_S]
    window = [v for v, at in stream.redelivered if at >= t_kill - ACK_WINDOW_S]
    print(
        f"kill -9: redelivered after ack: {len(window)} acked within {ACK_WINDOW_S} s of the kill, {len(late)} earlier"
    )
    assert late == [], late
    # The new owner recovered the managed ledger: the dead owner's ledger was fenced and closed
    # (BookKeeper recovery), and it writes to a ledger of its own.
    states = asyncio.run(_ledger_states(cluster.metadata_url, f"{ns}/persistent/kill"))
    assert before[-1] == "OPEN" and len(states) > len(before), (before, states)
    assert all(st == "CLOSED" for st in states[: len(before)]), (before, states)
