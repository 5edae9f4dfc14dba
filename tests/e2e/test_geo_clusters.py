"""Geo-replication between two real multi-broker clusters started with ``magnetar cluster up`` (issue 18).

Two clusters, A and B, each brought up the way a user does it::

    magnetar cluster up --data-dir A --cluster-name A --brokers 2 --bookies 2 \\
        --zookeeper <zk>/A --configuration-metadata-store zk:<zk>/instance

Each has its own local metadata store (its own ZooKeeper chroot: bookies,
ledgers, bundle ownership, broker registrations), two bookies and two
brokers; both share the instance's configuration store (clusters, tenants,
namespace policies), where initialize-cluster-metadata registered each
cluster with all of its brokers' URLs.  A tenant allowed on both and a
namespace replicated to both are created through A's admin API; the official
``pulsar-client`` produces and consumes.  B is stopped mid-stream with
``magnetar cluster down`` and brought back with ``magnetar cluster up``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from magnetar.cli.cluster import read_cluster_metadata
from magnetar.testing.geo import http_json as http
from magnetar.testing.geo import poll, receive_all, receive_until
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 -- fixture

pulsar = pytest.importorskip("pulsar")

TENANT = "geoc"
NS = f"{TENANT}/repl"
SNAPSHOT_MS = 300
BROKER_PROPERTIES = (
    f"replicatedSubscriptionsSnapshotFrequencyMillis={SNAPSHOT_MS}",
    "magnetarReplicationPolicyCheckIntervalMs=500",
    "statsUpdateFrequencyInSecs=1",
)


def magnetar(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", *args], capture_output=True, text=True, timeout=timeout_s
    )


class Cluster:
    """One ``magnetar cluster up`` cluster: its data dir, the up command, its URLs."""

    def __init__(self, name: str, data_dir: Path, zk_hosts: str, instance: str, config_store: str) -> None:
        self.name = name
        self.data_dir = data_dir
        self.up_args = ["cluster", "up", "--data-dir", str(data_dir), "--cluster-name", name,
                        "--brokers", "2", "--bookies", "2", "--no-autorecovery",
                        "--zookeeper", f"{zk_hosts}/{instance}-{name}",
                        "--configuration-metadata-store", config_store]  # fmt: skip
        for prop in BROKER_PROPERTIES:
            self.up_args += ["--broker-property", prop]

    def up_process(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "magnetar.cli.main", *self.up_args]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def up(self) -> None:
        done = magnetar(*self.up_args)
        assert done.returncode == 0, f"cluster up {self.name}: {done.stdout}\n{done.stderr}"

    def down(self) -> str:
        done = magnetar("cluster", "down", "--data-dir", str(self.data_dir), "--timeout", "30", timeout_s=180)
        return done.stdout + done.stderr

    @property
    def state(self) -> dict[str, Any]:
        return json.loads((self.data_dir / "cluster.json").read_text())

    @property
    def service_url(self) -> str:
        return self.state["service_url"]  # every broker: pulsar://h:p1,h:p2

    def web_url(self, i: int = 0) -> str:
        brokers = [p for p in self.state["processes"] if p["role"] == "broker"]
        return brokers[i]["urls"]["webServiceUrl"]

    def client(self) -> Any:
        return pulsar.Client(self.service_url, operation_timeout_seconds=60)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory, zookeeper_server):  # noqa: ANN001, F811
    tmp = tmp_path_factory.mktemp("geoc")
    instance = f"geoc-{uuid.uuid4().hex[:8]}"
    config_store = f"zk:{zookeeper_server.hosts}/{instance}-configuration"
    a, b = (Cluster(n, tmp / n, zookeeper_server.hosts, instance, config_store) for n in ("A", "B"))
    try:
        ups = [(c, c.up_process()) for c in (a, b)]  # both at once: start-up is mostly waiting
        for c, proc in ups:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, f"cluster up {c.name}:\n{out}\n{err}"
        http(
            "PUT",
            f"{a.web_url()}/admin/v2/tenants/{TENANT}",
            {"adminRoles": [], "allowedClusters": ["A", "B"]},
        )
        http("PUT", f"{a.web_url()}/admin/v2/namespaces/{NS}", {"replication_clusters": ["A", "B"]})
        http("POST", f"{a.web_url()}/admin/v2/namespaces/{NS}/deduplication", True)
        yield a, b
    finally:
        for c in (a, b):
            c.down()


def topic_stats(c: Cluster, name: str) -> dict[str, Any] | None:
    try:
        return http("GET", f"{c.web_url()}/admin/v2/persistent/{NS}/{name}/stats")
    except urllib.error.HTTPError:
        return None


def test_each_cluster_is_registered_in_the_shared_configuration_store(clusters) -> None:  # noqa: ANN001
    """Both clusters see each other (the configuration store), each with every broker's URL, and
    each has its own bookies and brokers (its own metadata store)."""
    a, b = clusters
    assert set(http("GET", f"{a.web_url(1)}/admin/v2/clusters")) >= {"A", "B"}  # any broker
    data = http("GET", f"{a.web_url()}/admin/v2/clusters/B")
    assert data["brokerServiceUrl"] == b.service_url and data["brokerServiceUrl"].count(",") == 1
    assert http("GET", f"{b.web_url()}/admin/v2/namespaces/{NS}/replication") == ["A", "B"]  # shared
    for c in (a, b):  # what ``magnetar cluster status`` reads, from each cluster's own store
        local = asyncio.run(read_cluster_metadata(c.state["metadata_url"]))
        assert len(local["bookies"]) == 2 and len(local["brokers"]) == 2, local
        assert c.state["configuration_store_url"] != c.state["metadata_url"]
    mine = {p["urls"]["bookieId"] for p in a.state["processes"] if p["role"] == "bookie"}
    theirs = {p["urls"]["bookieId"] for p in b.state["processes"] if p["role"] == "bookie"}
    assert not mine & theirs


@pytest.mark.parametrize("direction", ["A->B", "B->A"])
def test_active_active_between_clusters(clusters, direction: str) -> None:  # noqa: ANN001
    """Produce in one cluster, consume in the other (both ways): keys, properties, publish and
    event times intact; nothing replicated back."""
    a, b = clusters
    src, dst = (a, b) if direction == "A->B" else (b, a)
    name = f"aa-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    c_src, c_dst = src.client(), dst.client()
    try:
        remote = c_dst.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        local = c_src.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_src.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
        for i in range(40):
            producer.send_async(f"m{i}".encode(), None, partition_key=f"k{i % 4}",
                                properties={"i": str(i), "from": src.name}, event_timestamp=5000 + i)  # fmt: skip
        producer.flush()
        here = {m.data(): m for m in receive_all(local, 40)}
        there = receive_all(remote, 40)
        assert len(here) == 40
        assert sorted(m.data() for m in there) == sorted(here), "every message once in the other cluster"
        for m in there:
            orig = here[m.data()]
            assert m.partition_key() == orig.partition_key()
            assert m.properties() == orig.properties()
            assert m.publish_timestamp() == orig.publish_timestamp()
            assert m.event_timestamp() == orig.event_timestamp()
        with pytest.raises(pulsar.Timeout):
            remote.receive(timeout_millis=1000)
        # Not replicated back: the source topic holds the 40 originals only, its replicator idle.
        st = poll("replicator caught up",
                  lambda: (s := topic_stats(src, name)) and s["replication"].get(dst.name, {}).get(
                      "replicationBacklog") == 0 and s)  # fmt: skip
        assert st["msgInCounter"] == 40 and st["replication"][dst.name]["connected"] is True
    finally:
        c_src.close()
        c_dst.close()


def test_message_level_replication_clusters_between_clusters(clusters) -> None:  # noqa: ANN001
    a, b = clusters
    topic = f"persistent://{NS}/ml-{uuid.uuid4().hex[:8]}"
    c_a, c_b = a.client(), b.client()
    try:
        remote = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=False)
        producer.send(b"only-A", replication_clusters=["A"])
        producer.send(b"not-replicated", disable_replication=True)
        producer.send(b"to-B", replication_clusters=["B"])
        producer.send(b"everywhere")
        assert sorted(m.data() for m in receive_all(remote, 2, timeout_s=30)) == [b"everywhere", b"to-B"]
        with pytest.raises(pulsar.Timeout):
            remote.receive(timeout_millis=1500)
    finally:
        c_a.close()
        c_b.close()


def test_cluster_b_down_mid_stream_then_back_exactly_once(clusters) -> None:  # noqa: ANN001
    """A publishes steadily; B's whole cluster goes down (``magnetar cluster down``) mid-stream
    and comes back (``magnetar cluster up`` on the same data dir): A's replicator backlog grows
    meanwhile, then drains; B's consumers get every message exactly once."""
    a, b = clusters
    name = f"down-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    c_a, c_b = a.client(), b.client()
    sent: list[bytes] = []
    received: list[bytes] = []
    try:
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=2)
        stop = threading.Event()

        def produce() -> None:  # a steady stream until told to stop (B goes down meanwhile)
            while not stop.is_set() and len(sent) < 3000:
                data = f"{len(sent):05d}".encode()
                producer.send_async(data, None)
                sent.append(data)
                time.sleep(0.01)
            producer.flush()

        worker = threading.Thread(target=produce)
        worker.start()
        received += [m.data() for m in receive_all(consumer, 80)]
        consumer.close()  # its acknowledgements are in before B goes away
        c_b.close()
        print("magnetar cluster down B:", b.down())
        st = poll("A's replicator to B disconnected with a growing backlog",
                  lambda: (s := topic_stats(a, name)) and not s["replication"]["B"]["connected"]
                  and s["replication"]["B"]["replicationBacklog"] > 50 and s)  # fmt: skip
        stop.set()
        worker.join(60)
        total = len(sent)
        b.up()
        c_b = b.client()
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        received += [m.data() for m in receive_all(consumer, total - len(received), timeout_s=90)]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=1500)
        assert len(received) == total, f"nothing lost, nothing twice ({len(received)} of {total})"
        assert sorted(received) == sent
        poll("A's replicator to B drained",
             lambda: (s := topic_stats(a, name)) and s["replication"]["B"]["connected"]
             and s["replication"]["B"]["replicationBacklog"] == 0)  # fmt: skip
        print(f"B down: backlog {st['replication']['B']['replicationBacklog']}, {total} sent in all")
    finally:
        c_a.close()
        c_b.close()


def redelivery_bound(rate_per_s: int) -> int:
    """What a switch to B may re-deliver: what A acknowledged since its last snapshot, i.e. what
    was published within two snapshot intervals plus a snapshot's round trip (request to B and
    response back; up to 1 s on a loaded 2-core machine)."""
    return int(rate_per_s * (2 * SNAPSHOT_MS / 1000 + 1.0))


def sub_stats(c: Cluster, name: str, sub: str) -> dict[str, Any] | None:
    st = topic_stats(c, name)
    return None if st is None else st["subscriptions"].get(sub)


def test_replicated_subscription_switches_from_a_to_b(clusters) -> None:  # noqa: ANN001
    """Consume and acknowledge half a stream in A, switch the consumer to B: B delivers the rest,
    in order, re-delivering at most what A acknowledged since its last snapshot."""
    a, b = clusters
    name = f"rs-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    total, half, rate_per_s = 200, 100, 50
    c_a, c_b = a.client(), b.client()
    try:
        consumer = c_a.subscribe(topic, "rs", initial_position=pulsar.InitialPosition.Earliest,
                                 replicate_subscription_state_enabled=True)  # fmt: skip
        producer = c_a.create_producer(topic, batching_enabled=False)

        def produce() -> None:
            for i in range(total):
                producer.send_async(f"{i:04d}".encode(), None)
                time.sleep(1.0 / rate_per_s)
            producer.flush()

        worker = threading.Thread(target=produce)
        worker.start()
        acked = [m.data() for m in receive_all(consumer, half)]
        assert acked == [f"{i:04d}".encode() for i in range(half)]
        worker.join(30)
        st = poll("B's replicated subscription moved by A's acknowledgements",
                  lambda: (s := sub_stats(b, name, "rs")) and s["msgBacklog"] < total and s,
                  timeout_s=40)  # fmt: skip
        assert st["isReplicated"] is True
        consumer.close()
        failover = c_b.subscribe(topic, "rs", initial_position=pulsar.InitialPosition.Earliest,
                                 replicate_subscription_state_enabled=True)  # fmt: skip
        rest = receive_until(failover, f"{total - 1:04d}".encode())
        expected_rest = [f"{i:04d}".encode() for i in range(half, total)]
        assert [d for d in rest if d >= expected_rest[0]] == expected_rest, "no gap, in order"
        redelivered = [d for d in rest if d < expected_rest[0]]
        bound = redelivery_bound(rate_per_s)
        assert len(redelivered) <= bound, (len(redelivered), bound)
        assert len(set(rest)) == len(rest)
        print(f"replicated subscription A->B: {len(redelivered)} redelivered (bound {bound})")
    finally:
        c_a.close()
        c_b.close()


def test_replicated_subscription_snapshots_survive_a_restart_of_a(clusters) -> None:  # noqa: ANN001
    """The snapshots are markers stored in the topic: A's whole cluster restarts after a stream
    was published (and snapshotted) but before anything was consumed; then A's consumer takes
    three quarters of it.  Only the snapshots taken before the restart lie within what it
    acknowledged (the first one after the restart sits behind the last message), so B's
    subscription moves only if A read them back; a consumer switching to B then re-receives at
    most what lies between the last such snapshot and where A stopped."""
    a, b = clusters
    name = f"rsr-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    total, part, rate_per_s = 200, 150, 50
    c_a, c_b = a.client(), b.client()
    try:
        c_a.subscribe(topic, "rs", initial_position=pulsar.InitialPosition.Earliest,
                      replicate_subscription_state_enabled=True).close()  # fmt: skip
        producer = c_a.create_producer(topic, batching_enabled=False)
        for i in range(total):
            producer.send_async(f"{i:04d}".encode(), None)
            time.sleep(1.0 / rate_per_s)
        producer.flush()
        poll("A's replicator to B caught up",
             lambda: (s := topic_stats(a, name)) and s["replication"]["B"]["replicationBacklog"] == 0)  # fmt: skip
        time.sleep(3 * SNAPSHOT_MS / 1000)  # the last snapshot round completes
        c_a.close()
        print("magnetar cluster down A:", a.down())
        a.up()
        c_a = a.client()
        consumer = c_a.subscribe(topic, "rs", replicate_subscription_state_enabled=True)
        got = [m.data() for m in receive_all(consumer, part)]
        assert got == [f"{i:04d}".encode() for i in range(part)]
        consumer.close()  # acknowledgements flushed
        st = poll("B's subscription moved by a snapshot taken before A's restart",
                  lambda: (s := sub_stats(b, name, "rs")) and s["msgBacklog"] < total - part // 2 and s,
                  timeout_s=40)  # fmt: skip
        failover = c_b.subscribe(topic, "rs", replicate_subscription_state_enabled=True)
        rest = receive_until(failover, f"{total - 1:04d}".encode())
        expected = [f"{i:04d}".encode() for i in range(part, total)]
        assert [d for d in rest if d >= expected[0]] == expected, "no gap, in order"
        redelivered = [d for d in rest if d < expected[0]]
        bound = redelivery_bound(rate_per_s)
        assert len(redelivered) <= bound, (len(redelivered), bound, st)
        print(f"after A's restart: {len(redelivered)} redelivered in B (bound {bound})")
    finally:
        c_a.close()
        c_b.close()


def test_copy_deleted_when_b_leaves_is_not_created_again(clusters) -> None:  # noqa: ANN001
    """B leaves a namespace's replication clusters: B deletes its copy (Pulsar's checkReplication),
    and neither B's consumer, still reconnecting, nor a new one creates it again -- B refuses a
    topic in a namespace not replicated to it, as Pulsar does."""
    a, b = clusters
    ns = f"{TENANT}/leave-{uuid.uuid4().hex[:6]}"
    http("PUT", f"{a.web_url()}/admin/v2/namespaces/{ns}", {"replication_clusters": ["A", "B"]})
    topic = f"persistent://{ns}/t"
    stats_url = f"{b.web_url()}/admin/v2/persistent/{ns}/t/stats"
    c_a, c_b = a.client(), b.client()

    def gone_in_b() -> bool:
        try:
            http("GET", stats_url)
        except urllib.error.HTTPError as err:
            return err.code == 404
        return False

    try:
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        c_a.create_producer(topic).send(b"before")
        assert [m.data() for m in receive_all(consumer, 1)] == [b"before"]
        http("POST", f"{a.web_url()}/admin/v2/namespaces/{ns}/replication", ["A"])
        poll("B deleted its copy", gone_in_b, timeout_s=60)
        with pytest.raises(Exception, match="(?i)cluster|not allowed|NotAllowed"):  # noqa: PT011 -- the client's error type
            c_b.subscribe(topic, "s2")
        time.sleep(3)  # the first consumer keeps reconnecting meanwhile
        assert gone_in_b(), "a reconnecting client created B's copy again"
        stats = http("GET", f"{a.web_url()}/admin/v2/persistent/{ns}/t/stats")
        assert stats["msgInCounter"] == 1
    finally:
        c_a.close()
        c_b.close()
