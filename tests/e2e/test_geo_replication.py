"""Geo-replication between two real ``magnetar standalone`` processes (issue 18).

Two clusters, A and B, each a standalone with its own local metadata and
bookie, sharing one configuration store (``configurationMetadataStoreUrl``:
a real ZooKeeper) where clusters, tenants and namespace policies live.  The
official ``pulsar-client`` produces and consumes; everything is on loopback.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from magnetar.testing.cli import run_admin
from magnetar.testing.geo import http_json as http
from magnetar.testing.geo import poll, receive_all, receive_until
from magnetar.testing.standalone import StandaloneProcess, start_together
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 -- fixture

pulsar = pytest.importorskip("pulsar")

TENANT = "geo"
NS = f"{TENANT}/repl"
SNAPSHOT_MS = 300


def cluster_process(tmp: Path, name: str, zk_url: str, extra: str = "") -> StandaloneProcess:
    conf = tmp / f"{name}.conf"
    conf.write_text(
        f"clusterName={name}\nconfigurationMetadataStoreUrl={zk_url}\n"
        "functionsWorkerEnabled=false\nstatsUpdateFrequencyInSecs=1\n"
        "magnetarReplicationPolicyCheckIntervalMs=500\n"
        f"replicatedSubscriptionsSnapshotFrequencyMillis={SNAPSHOT_MS}\n" + extra
    )
    return StandaloneProcess(tmp / f"data-{name}", config_file=conf, extra_args=["--no-functions-worker"])


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory, zookeeper_server):  # noqa: ANN001, F811
    tmp = tmp_path_factory.mktemp("geo")
    zk_url = f"zk:{zookeeper_server.hosts}/geo-{uuid.uuid4().hex[:8]}"
    a, b = cluster_process(tmp, "A", zk_url), cluster_process(tmp, "B", zk_url)
    start_together((a, b), timeout_s=90)  # both at once: start-up is mostly waiting
    try:
        # Both registered themselves in the shared configuration store.
        assert set(http("GET", f"{a.web_url}/admin/v2/clusters")) >= {"A", "B"}
        http(
            "PUT", f"{a.web_url}/admin/v2/tenants/{TENANT}", {"adminRoles": [], "allowedClusters": ["A", "B"]}
        )
        http("PUT", f"{b.web_url}/admin/v2/namespaces/{NS}", {"replication_clusters": ["A", "B"]})
        http("POST", f"{a.web_url}/admin/v2/namespaces/{NS}/deduplication", True)
        yield a, b
    finally:
        for p in (a, b):
            p.terminate()


def client(proc: StandaloneProcess) -> Any:
    return pulsar.Client(proc.broker_url, operation_timeout_seconds=30)


def test_namespace_policies_are_shared_and_tenants_restrict_clusters(clusters) -> None:  # noqa: ANN001
    a, b = clusters
    assert http("GET", f"{a.web_url}/admin/v2/namespaces/{NS}/replication") == ["A", "B"]
    assert NS in http("GET", f"{b.web_url}/admin/v2/namespaces/{TENANT}")
    # A cluster the tenant does not allow is refused, as Pulsar does (412).
    http("PUT", f"{a.web_url}/admin/v2/clusters/C",
         {"serviceUrl": "http://127.0.0.1:1", "brokerServiceUrl": "pulsar://127.0.0.1:1"})  # fmt: skip
    assert "C" in http("GET", f"{b.web_url}/admin/v2/clusters")
    with pytest.raises(urllib.error.HTTPError) as err:
        http("POST", f"{a.web_url}/admin/v2/namespaces/{NS}/replication", ["A", "C"])
    assert err.value.code == 412
    http("DELETE", f"{b.web_url}/admin/v2/clusters/C")


@pytest.mark.parametrize("direction", ["A->B", "B->A"])
def test_active_active_keys_properties_and_publish_times(clusters, direction: str) -> None:  # noqa: ANN001
    a, b = clusters
    src, dst = (a, b) if direction == "A->B" else (b, a)
    topic = f"persistent://{NS}/aa-{uuid.uuid4().hex[:8]}"
    c_src, c_dst = client(src), client(dst)
    try:
        remote = c_dst.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        local = c_src.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_src.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
        for i in range(30):
            producer.send_async(f"m{i}".encode(), None, partition_key=f"k{i % 3}",
                                properties={"i": str(i), "from": direction}, event_timestamp=1000 + i)  # fmt: skip
        producer.flush()
        here = {m.data(): m for m in receive_all(local, 30)}
        there = receive_all(remote, 30)
        assert sorted(m.data() for m in there) == sorted(here), (
            "every message arrives once in the other cluster"
        )
        for m in there:
            orig = here[m.data()]
            assert m.partition_key() == orig.partition_key()
            assert m.properties() == orig.properties()
            assert m.publish_timestamp() == orig.publish_timestamp()
            assert m.event_timestamp() == orig.event_timestamp()
        # The copy is not replicated back: the source topic holds the 30 originals only.
        time.sleep(1.5)
        stats = http("GET", f"{src.web_url}/admin/v2/persistent/{NS}/{topic.rsplit('/', 1)[1]}/stats")
        assert stats["msgInCounter"] == 30
        dst_name = "B" if direction == "A->B" else "A"
        repl = stats["replication"][dst_name]
        assert repl["connected"] is True and repl["replicationBacklog"] == 0
        remote_stats = http("GET", f"{dst.web_url}/admin/v2/persistent/{NS}/{topic.rsplit('/', 1)[1]}/stats")
        inbound = remote_stats["replication"]["A" if direction == "A->B" else "B"]
        assert inbound["inboundConnection"], inbound
    finally:
        c_src.close()
        c_dst.close()


def test_message_level_replication_clusters(clusters) -> None:  # noqa: ANN001
    a, b = clusters
    topic = f"persistent://{NS}/ml-{uuid.uuid4().hex[:8]}"
    c_a, c_b = client(a), client(b)
    try:
        remote = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=False)
        producer.send(b"only-A", replication_clusters=["A"])
        producer.send(b"not-replicated", disable_replication=True)
        producer.send(b"to-B", replication_clusters=["B"])
        producer.send(b"everywhere")
        got = [m.data() for m in receive_all(remote, 2, timeout_s=30)]
        assert sorted(got) == [b"everywhere", b"to-B"]
        with pytest.raises(pulsar.Timeout):
            remote.receive(timeout_millis=2000)
    finally:
        c_a.close()
        c_b.close()


def test_partitioned_topic_replicates_partition_by_partition(clusters) -> None:  # noqa: ANN001
    a, b = clusters
    name = f"pt-{uuid.uuid4().hex[:8]}"
    http("PUT", f"{a.web_url}/admin/v2/persistent/{NS}/{name}/partitions", 3)
    topic = f"persistent://{NS}/{name}"
    c_a, c_b = client(a), client(b)
    try:
        remote = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(f"p{i}".encode(), partition_key=f"key-{i}")
        got = receive_all(remote, 30)
        assert sorted(m.data() for m in got) == sorted(f"p{i}".encode() for i in range(30))
        stats = http("GET", f"{a.web_url}/admin/v2/persistent/{NS}/{name}/partitioned-stats")
        assert "B" in stats["replication"]
    finally:
        c_a.close()
        c_b.close()


def test_remote_down_backlog_grows_then_exactly_once(clusters) -> None:  # noqa: ANN001
    a, b = clusters
    name = f"down-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    total = 600
    c_a = client(a)
    c_b = client(b)
    received: list[bytes] = []
    try:
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=2)
        sent = threading.Event()

        def produce() -> None:
            for i in range(total):
                producer.send_async(f"{i:05d}".encode(), None)
                time.sleep(0.005)
            producer.flush()
            sent.set()

        worker = threading.Thread(target=produce)
        worker.start()
        received += [m.data() for m in receive_all(consumer, 100)]
        consumer.close()  # acks flushed: what B's consumer saw is acknowledged there
        c_b.close()
        b.terminate()  # B goes away mid-stream
        time.sleep(2.0)
        stats = http("GET", f"{a.web_url}/admin/v2/persistent/{NS}/{name}/stats")["replication"]["B"]
        assert stats["connected"] is False
        assert stats["replicationBacklog"] > 0, stats
        assert stats["replicationDelayInSeconds"] >= 1, stats
        metrics = urllib.request.urlopen(f"{a.web_url}/metrics", timeout=30).read().decode()
        assert "pulsar_replication_backlog{" in metrics and 'remote_cluster="B"' in metrics
        worker.join(60)
        assert sent.is_set()
        b.restart()
        c_b = client(b)
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        received += [m.data() for m in receive_all(consumer, total - len(received), timeout_s=90)]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=2000)
        assert len(received) == total, "nothing lost, nothing twice"
        assert sorted(received) == [f"{i:05d}".encode() for i in range(total)]
        stats = http("GET", f"{a.web_url}/admin/v2/persistent/{NS}/{name}/stats")["replication"]["B"]
        assert stats["connected"] is True and stats["replicationBacklog"] == 0
    finally:
        c_a.close()
        c_b.close()


def sub_stats(proc: StandaloneProcess, name: str, sub: str) -> dict | None:
    try:
        stats = http("GET", f"{proc.web_url}/admin/v2/persistent/{NS}/{name}/stats")
    except urllib.error.HTTPError:
        return None
    return stats["subscriptions"].get(sub)


def test_replicated_subscription_fails_over_without_gap(clusters) -> None:  # noqa: ANN001
    """Consume and acknowledge half a stream in A, switch the consumer to B: B delivers the rest,
    re-delivering only what was acknowledged in A since the last snapshot."""
    a, b = clusters
    name = f"rs-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    total, half, rate_per_s = 200, 100, 100
    c_a, c_b = client(a), client(b)
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
        # The acknowledgements in A reach B as an UPDATE marker once a snapshot covers them.
        st = poll("B's subscription moved by A's acknowledgements",
                  lambda: (s := sub_stats(b, name, "rs")) and s["msgBacklog"] < total and s,
                  timeout_s=40)  # fmt: skip
        assert st["isReplicated"] is True
        consumer.close()
        failover = c_b.subscribe(topic, "rs", initial_position=pulsar.InitialPosition.Earliest,
                                 replicate_subscription_state_enabled=True)  # fmt: skip
        rest = receive_until(failover, f"{total - 1:04d}".encode())  # the last message, then 1 s quiet
        expected_rest = [f"{i:04d}".encode() for i in range(half, total)]
        assert [d for d in rest if d >= expected_rest[0]] == expected_rest, "no gap, in order"
        redelivered = [d for d in rest if d < expected_rest[0]]
        # Bounded by what A acknowledged since its last snapshot: a few intervals at most.
        bound = int(rate_per_s * SNAPSHOT_MS / 1000 * 2)
        assert len(redelivered) <= bound, (len(redelivered), bound)
        print(f"replicated subscription: {len(redelivered)} redelivered after fail-over (bound {bound})")
        assert len(set(rest)) == len(rest)
        # And back: what B acknowledged moves A's subscription too (active-active).
        failover.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st = sub_stats(a, name, "rs")
            if st is not None and st["msgBacklog"] < bound:
                break
            time.sleep(0.3)
        back = c_a.subscribe(topic, "rs", replicate_subscription_state_enabled=True)
        again: list[bytes] = []
        while True:
            try:
                msg = back.receive(timeout_millis=2000)
            except pulsar.Timeout:
                break
            back.acknowledge(msg)
            again.append(msg.data())
        assert len(again) <= bound, (len(again), bound)
        print(f"replicated subscription: {len(again)} redelivered after fail-back to A")
    finally:
        c_a.close()
        c_b.close()


def admin(proc: StandaloneProcess, *args: str) -> str:
    return run_admin(proc.web_url, "-o", "json", *args).stdout  # in-process: magnetar.testing.cli


def test_cli_setup_and_topic_level_replication_policy(clusters) -> None:  # noqa: ANN001
    """What a user types: clusters, tenant allowed clusters and namespace replication through
    ``magnetar admin``; then a topic-level policy narrows one topic to the local cluster."""
    a, b = clusters
    assert "A" in admin(b, "clusters", "list") and "B" in admin(a, "clusters", "list")
    admin(a, "tenants", "create", "geocli", "--allowed-clusters", "A,B")
    admin(b, "namespaces", "create", "geocli/ns", "-c", "A")
    admin(b, "namespaces", "set-clusters", "geocli/ns", "-c", "A,B")
    assert json.loads(admin(a, "namespaces", "get-clusters", "geocli/ns")) == ["A", "B"]
    c_a, c_b = client(a), client(b)
    try:
        replicated = f"persistent://geocli/ns/t-{uuid.uuid4().hex[:8]}"
        local_only = f"persistent://geocli/ns/l-{uuid.uuid4().hex[:8]}"
        subs = {t: c_b.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
                for t in (replicated, local_only)}  # fmt: skip
        producers = {t: c_a.create_producer(t) for t in (replicated, local_only)}
        admin(a, "topics", "set-replication-clusters", local_only, "-c", "A")
        time.sleep(1.5)  # the policy check (500 ms here) stops the topic's replicator to B
        stats = http("GET", f"{a.web_url}/admin/v2/persistent/geocli/ns/{local_only.rsplit('/', 1)[1]}/stats")
        assert "B" not in stats["replication"] or not stats["replication"]["B"]["outboundConnection"]
        for p in producers.values():
            p.send(b"hello")
        assert subs[replicated].receive(timeout_millis=20_000).data() == b"hello"
        with pytest.raises(pulsar.Timeout):
            subs[local_only].receive(timeout_millis=2000)
    finally:
        c_a.close()
        c_b.close()


def test_source_restarted_with_backlog_drains_without_clients(clusters) -> None:  # noqa: ANN001
    """B down, A publishes, A restarts, B returns: A's broker loads the replicated topic by
    itself and B gets everything, though no client touches the topic in A again."""
    a, b = clusters
    name = f"src-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    c_b = client(b)
    c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
    c_b.close()
    b.terminate()
    c_a = client(a)
    producer = c_a.create_producer(topic, batching_enabled=False)
    for i in range(50):
        producer.send(f"{i:03d}".encode())
    c_a.close()
    a.restart()
    b.restart()
    c_b = client(b)
    try:
        consumer = c_b.subscribe(topic, "s")
        got = sorted(m.data() for m in receive_all(consumer, 50, timeout_s=60))
        assert got == [f"{i:03d}".encode() for i in range(50)]
    finally:
        c_b.close()


def test_backlog_quota_bounds_an_unreachable_clusters_backlog(clusters) -> None:  # noqa: ANN001
    """A replicator whose cluster never answers holds a backlog; the namespace's backlog quota
    counts it (new producers are refused), and dropping the cluster from the policy removes
    the replicator and its cursor."""
    a, _b = clusters
    http("PUT", f"{a.web_url}/admin/v2/clusters/D",
         {"serviceUrl": "http://127.0.0.1:9", "brokerServiceUrl": "pulsar://127.0.0.1:9"})  # fmt: skip
    http("PUT", f"{a.web_url}/admin/v2/tenants/geoq", {"adminRoles": [], "allowedClusters": ["A", "D"]})
    http("PUT", f"{a.web_url}/admin/v2/namespaces/geoq/ns", {"replication_clusters": ["A", "D"]})
    http("POST", f"{a.web_url}/admin/v2/namespaces/geoq/ns/backlogQuota",
         {"limitSize": 20_000, "limitTime": -1, "policy": "producer_exception"})  # fmt: skip
    name = f"q-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://geoq/ns/{name}"
    c_a = client(a)
    try:
        producer = c_a.create_producer(topic, batching_enabled=False)
        for _ in range(60):
            try:
                producer.send(b"z" * 1000)
            except Exception:  # noqa: BLE001 -- the quota enforcer may already disconnect it
                break
        stats = http("GET", f"{a.web_url}/admin/v2/persistent/geoq/ns/{name}/stats")
        assert stats["replication"]["D"]["connected"] is False
        assert stats["replication"]["D"]["replicationBacklog"] >= 20
        refused: Exception | None = None
        deadline = time.monotonic() + 15
        while refused is None and time.monotonic() < deadline:  # the quota check sees the backlog
            try:
                c_a.create_producer(topic).close()
            except Exception as exc:  # noqa: BLE001 -- the client's error for the broker's refusal
                refused = exc
            else:
                time.sleep(0.5)
        assert refused is not None and re.search("(?i)quota|blocked", str(refused)), refused
        http("POST", f"{a.web_url}/admin/v2/namespaces/geoq/ns/replication", ["A"])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            stats = http("GET", f"{a.web_url}/admin/v2/persistent/geoq/ns/{name}/stats")
            if "D" not in stats["replication"]:
                break
            time.sleep(0.3)
        assert "D" not in stats["replication"]
        internal = http("GET", f"{a.web_url}/admin/v2/persistent/geoq/ns/{name}/internalStats")
        assert "pulsar.repl.D" not in internal["cursors"]
        c_a.create_producer(topic).close()  # the backlog went with the cursor
    finally:
        c_a.close()


def test_replicator_dispatch_rate_bounds_the_replication_rate(clusters) -> None:  # noqa: ANN001
    """The topic's ``replicatorDispatchRate`` (20 msg/s) paces A's replicator to B: 60 messages
    published at once in A reach B over ~2 s (three periods), not all at once."""
    a, b = clusters
    name = f"rate-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    rate, total = 20, 60
    c_a, c_b = client(a), client(b)
    try:
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=False)
        url = f"{a.web_url}/admin/v2/persistent/{NS}/{name}/replicatorDispatchRate"
        http("POST", url, {"dispatchThrottlingRateInMsg": rate, "dispatchThrottlingRateInByte": -1,
                           "ratePeriodInSecond": 1})  # fmt: skip
        assert http("GET", url)["dispatchThrottlingRateInMsg"] == rate
        time.sleep(1.0)  # the policy enforcer hands the loaded topic its new policies
        for i in range(total):
            producer.send_async(f"{i:03d}".encode(), None)
        producer.flush()
        arrivals: list[float] = []
        deadline = time.monotonic() + 30
        while len(arrivals) < total and time.monotonic() < deadline:
            try:
                consumer.acknowledge(consumer.receive(timeout_millis=1000))
            except pulsar.Timeout:
                continue
            arrivals.append(time.monotonic())
        assert len(arrivals) == total
        span = arrivals[-1] - arrivals[0]
        first_second = sum(1 for t in arrivals if t - arrivals[0] < 0.9)
        print(
            f"replicator rate {rate}/s: {total} messages over {span:.2f}s, {first_second} in the first 0.9 s"
        )
        assert span >= 1.6, f"{total} messages at {rate}/s arrived within {span:.2f}s"
        assert first_second <= rate + 2, first_second
    finally:
        c_a.close()
        c_b.close()


def test_deleting_a_replicated_topic_is_forbidden_unless_forced(clusters) -> None:  # noqa: ANN001
    """As Pulsar: a delete without force of a topic with replicators is refused (400, "Delete
    forbidden topic is replicated on clusters [B]"); a forced delete removes the local topic only,
    its replicator closed first, and B's copy stays."""
    a, b = clusters
    name = f"del-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    c_a, c_b = client(a), client(b)
    try:
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c_a.create_producer(topic, batching_enabled=False)
        for i in range(5):
            producer.send(f"d{i}".encode())
        assert len(receive_all(consumer, 5)) == 5
        producer.close()
        url = f"{a.web_url}/admin/v2/persistent/{NS}/{name}"
        with pytest.raises(urllib.error.HTTPError) as err:
            http("DELETE", url)
        assert err.value.code == 400
        assert "replicated on clusters ['B']" in err.value.read().decode()
        http("DELETE", f"{url}?force=true")
        with pytest.raises(urllib.error.HTTPError) as err:
            http("GET", f"{url}/stats")
        assert err.value.code == 404
        # The copy in B is untouched: its subscription still there, the messages stored.
        stats = http("GET", f"{b.web_url}/admin/v2/persistent/{NS}/{name}/stats")
        assert stats["msgInCounter"] == 5 and "s" in stats["subscriptions"]
        # A's broker is healthy: a new topic of the namespace still replicates.
        other = f"persistent://{NS}/after-{name}"
        c2 = c_b.subscribe(other, "s", initial_position=pulsar.InitialPosition.Earliest)
        c_a.create_producer(other).send(b"x")
        assert [m.data() for m in receive_all(c2, 1)] == [b"x"]
    finally:
        c_a.close()
        c_b.close()


class GeoRecord(pulsar.schema.Record):
    name = pulsar.schema.String()
    n = pulsar.schema.Integer()


def test_schema_is_carried_to_the_remote_topic(clusters) -> None:  # noqa: ANN001
    """A's producer has a JSON schema: A's replicator registers it on B's topic (GET_OR_CREATE_SCHEMA)
    before sending, so B's registry holds it and a consumer in B with that schema decodes."""
    a, b = clusters
    name = f"schema-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{NS}/{name}"
    schema = pulsar.schema.JsonSchema(GeoRecord)
    c_a, c_b = client(a), client(b)
    try:
        # A schemaless subscription in B first, so B's topic does not get its schema from a consumer.
        c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
        producer = c_a.create_producer(topic, schema=schema)
        for i in range(10):
            producer.send(GeoRecord(name=f"r{i}", n=i))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st = http("GET", f"{b.web_url}/admin/v2/persistent/{NS}/{name}/stats")
            if st["msgInCounter"] >= 10:
                break
            time.sleep(0.3)
        here = http("GET", f"{a.web_url}/admin/v2/schemas/{NS}/{name}/schema")
        there = http("GET", f"{b.web_url}/admin/v2/schemas/{NS}/{name}/schema")
        assert there["type"] == "JSON" and json.loads(there["data"]) == json.loads(here["data"])
        consumer = c_b.subscribe(topic, "s", schema=schema, initial_position=pulsar.InitialPosition.Earliest)
        got = [m.value() for m in receive_all(consumer, 10)]
        assert [(r.name, r.n) for r in got] == [(f"r{i}", i) for i in range(10)]
    finally:
        c_a.close()
        c_b.close()


def test_cluster_removed_from_namespace_deletes_its_copies(clusters) -> None:  # noqa: ANN001
    """As Pulsar's checkReplication: when B leaves a namespace's replication clusters, B's
    broker deletes its copies of the namespace's topics; A keeps its topic, its replicator gone."""
    a, b = clusters
    ns = f"{TENANT}/leave-{uuid.uuid4().hex[:6]}"
    http("PUT", f"{a.web_url}/admin/v2/namespaces/{ns}", {"replication_clusters": ["A", "B"]})
    name = "t"
    topic = f"persistent://{ns}/{name}"
    c_a, c_b = client(a), client(b)
    try:
        consumer = c_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        c_a.create_producer(topic).send(b"before")
        assert [m.data() for m in receive_all(consumer, 1)] == [b"before"]
        consumer.close()
        http("POST", f"{a.web_url}/admin/v2/namespaces/{ns}/replication", ["A"])
        deadline = time.monotonic() + 15
        gone = False
        while time.monotonic() < deadline and not gone:
            try:
                http("GET", f"{b.web_url}/admin/v2/persistent/{ns}/{name}/stats")
                time.sleep(0.3)
            except urllib.error.HTTPError as err:
                gone = err.code == 404
        assert gone, "B still has its copy"
        # A learns of the policy change through its own watch: B may act on it first
        deadline = time.monotonic() + 20
        stats = http("GET", f"{a.web_url}/admin/v2/persistent/{ns}/{name}/stats")
        while "B" in stats["replication"] and time.monotonic() < deadline:
            time.sleep(0.3)
            stats = http("GET", f"{a.web_url}/admin/v2/persistent/{ns}/{name}/stats")
        assert stats["msgInCounter"] == 1 and "B" not in stats["replication"]
    finally:
        c_a.close()
        c_b.close()
