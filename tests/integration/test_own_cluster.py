"""Bundle ownership in a real cluster: ZooKeeper, two ``magnetar bookie``, three ``magnetar broker``.

Every piece is a real process on loopback, started by
:class:`~magnetar.testing.cluster.ClusterProcesses` (the config files and command lines of
``magnetar cluster up``; the brokers start together).  The
official client (pulsar-client) talks to each broker's URL; the brokers
register under ``/loadbalance/brokers``, elect a leader, split namespaces into
bundles, own each bundle through an ephemeral lock and redirect lookups to the
owner.  The module's tests share one cluster and run in file order: the last
ones take ZooKeeper away past the session timeout and stop an owner gracefully
(the kill -9, pause, unload and many-topics cases live in
test_cluster_mustshow.py, on the shared ClusterProcesses kit).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from magnetar.testing.cluster import ClusterProcesses
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.streams import NumberedStream
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]

# The failover time depends on it (MAGNETAR_OWN_SESSION_MS=1000 measures the figure).
SESSION_TIMEOUT_MS = int(os.environ.get("MAGNETAR_OWN_SESSION_MS", "2000"))
BROKERS = 3
BOOKIES = 2


class Broker:
    """One broker of the kit's cluster, as these tests use it (one object per broker: compared by ``is``)."""

    def __init__(self, kit: ClusterProcesses, i: int) -> None:
        self.kit, self.name = kit, f"broker-{i}"
        self.web_url, self.broker_url = kit.web_url(i), kit.broker_url(i)
        self.broker_id = self.web_url.split("://", 1)[1]

    @property
    def proc(self) -> subprocess.Popen:
        return self.kit.procs[self.name]

    def terminate(self) -> int | None:
        """SIGTERM; the exit status."""
        return self.kit.terminate(self.name)

    def log_tail(self, lines: int = 40) -> str:
        return self.kit.log(self.name, lines)


class Cluster:
    def __init__(self, kit: ClusterProcesses) -> None:
        self.kit = kit
        self.brokers = [Broker(kit, i) for i in range(BROKERS)]

    def live(self) -> list[Broker]:
        return [b for b in self.brokers if self.kit.running(b.name)]

    def service_url(self) -> str:
        return "pulsar://" + ",".join(b.broker_url.split("://", 1)[1] for b in self.live())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper_server):
    with ClusterProcesses(
        tmp_path_factory.mktemp("own-cluster"),
        brokers=BROKERS,
        bookies=BOOKIES,
        zookeeper_url=zookeeper_server.url,  # the shared server: a test takes it away and back
        cluster_name="own-cluster",
        broker_properties={"metadataStoreSessionTimeoutMillis": str(SESSION_TIMEOUT_MS)},
    ) as kit:
        yield Cluster(kit)


def http(method: str, url: str, body: object = None, follow: bool = True) -> tuple[int, object, dict]:
    """One request; with ``follow``, 307s are followed for every method (as Pulsar's admin does)."""
    for _ in range(5):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.build_opener(_NoRedirect()).open(req, timeout=60) as resp:
                raw, status = resp.read(), resp.status
                headers = {k.lower(): v for k, v in resp.headers.items()}
        except urllib.error.HTTPError as e:
            raw, status, headers = e.read(), e.code, {k.lower(): v for k, v in e.headers.items()}
        if not (follow and status == 307):
            break
        url = headers["location"]
    try:
        return status, json.loads(raw) if raw else None, headers
    except ValueError:
        return status, raw.decode(), headers


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


def client(url: str):
    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def owners(c: Cluster, namespace: str) -> dict[str, str]:
    """bundle range -> owner broker id, from every live broker's ownedNamespaces."""
    out: dict[str, str] = {}
    for b in c.live():
        status, owned, _ = http(
            "GET", f"{b.web_url}/admin/v2/brokers/own-cluster/{b.broker_id}/ownedNamespaces"
        )
        assert status == 200, owned
        for key in owned:
            ns, _, rng = key.rpartition("/")
            if ns == namespace:
                assert rng not in out, f"bundle {rng} owned twice: {out[rng]} and {b.broker_id}"
                out[rng] = b.broker_id
    return out


def owner_of_topic(c: Cluster, topic: str, via: Broker | None = None) -> Broker:
    via = via or c.live()[0]
    status, data, _ = http("GET", f"{via.web_url}/lookup/v2/topic/{topic.replace('://', '/')}")
    assert status == 200, data
    return next(b for b in c.live() if b.broker_url == data["brokerUrl"])


def new_namespace(c: Cluster, bundles: int = 8) -> str:
    ns = f"public/own-{uuid.uuid4().hex[:6]}"
    status, body, _ = http(
        "PUT", f"{c.brokers[0].web_url}/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": bundles}}
    )
    assert status == 204, body
    return ns


# ---------------------------------------------------------------- registration, leader
def test_brokers_register_and_elect_one_leader(cluster):
    ids = sorted(b.broker_id for b in cluster.brokers)
    leaders = set()
    for b in cluster.brokers:  # each sees all three (a registration may still be on its way)
        deadline = time.monotonic() + 30
        while True:
            status, listed, _ = http("GET", f"{b.web_url}/admin/v2/brokers/own-cluster")
            if (status == 200 and sorted(listed) == ids) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 200 and sorted(listed) == ids
        status, leader, _ = http("GET", f"{b.web_url}/admin/v2/brokers/leaderBroker")
        assert status == 200, leader
        leaders.add(leader["brokerId"])
    assert len(leaders) == 1 and leaders <= set(ids)
    for b in cluster.brokers:  # the health check's own topic is served by each broker itself
        status, text, _ = http("GET", f"{b.web_url}/admin/v2/brokers/health")
        assert status == 200 and text == "ok", text


def test_partitioned_topic_spread_over_the_brokers(cluster):
    ns = new_namespace(cluster, bundles=8)
    topic = f"persistent://{ns}/parted"
    status, body, _ = http(
        "PUT", f"{cluster.brokers[0].web_url}/admin/v2/{topic.replace('://', '/')}/partitions", 6
    )
    assert status == 204, body
    cl = client(cluster.brokers[2].broker_url)
    try:
        consumer = cl.subscribe(topic, "s")
        producer = cl.create_producer(topic, batching_enabled=False)
        for i in range(60):
            producer.send(f"p{i}".encode(), partition_key=str(i))
        got = sorted(consumer.receive(timeout_millis=20_000).data() for _ in range(60))
        assert got == sorted(f"p{i}".encode() for i in range(60))
    finally:
        cl.close()
    partition_owners = {owner_of_topic(cluster, f"{topic}-partition-{i}").broker_id for i in range(6)}
    assert len(partition_owners) >= 2, partition_owners


# ---------------------------------------------------------------- bundles, lookups, redirects
def test_http_lookup_and_topic_admin_redirect_to_the_owner(cluster):
    ns = new_namespace(cluster, bundles=4)
    topic = f"persistent://{ns}/redir"
    cl = client(cluster.brokers[0].broker_url)
    cl.create_producer(topic).send(b"x")
    owner = owner_of_topic(cluster, topic)
    other = next(b for b in cluster.brokers if b is not owner)
    path = topic.replace("://", "/")
    status, _, headers = http("GET", f"{other.web_url}/lookup/v2/topic/{path}", follow=False)
    assert status == 307
    assert headers["location"].startswith(f"{owner.web_url}/lookup/v2/topic/{path}")
    assert "authoritative=true" in headers["location"]
    status, stats, headers = http("GET", f"{other.web_url}/admin/v2/{path}/stats", follow=False)
    assert status == 307 and headers["location"].startswith(f"{owner.web_url}/admin/v2/{path}/stats")
    status, stats, _ = http("GET", f"{other.web_url}/admin/v2/{path}/stats")  # followed
    assert status == 200 and stats["msgInCounter"] == 1
    status, data, _ = http("GET", f"{owner.web_url}/lookup/v2/topic/{path}", follow=False)
    assert status == 200 and data["brokerUrl"] == owner.broker_url and data["brokerUrlTls"] is None
    cl.close()


def test_split_bundle_and_namespace_unload(cluster):
    ns = new_namespace(cluster, bundles=2)
    web = cluster.brokers[0].web_url
    status, bundles, _ = http("GET", f"{web}/admin/v2/namespaces/{ns}/bundles")
    first = f"{bundles['boundaries'][0]}_{bundles['boundaries'][1]}"
    status, body, _ = http(
        "PUT", f"{web}/admin/v2/namespaces/{ns}/{first}/split?splitAlgorithmName=range_equally_divide"
    )
    assert status == 204, body
    status, bundles, _ = http("GET", f"{cluster.brokers[2].web_url}/admin/v2/namespaces/{ns}/bundles")
    assert bundles == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xffffffff"],
        "numBundles": 3,
    }
    cl = client(cluster.brokers[1].broker_url)
    for i in range(8):
        cl.create_producer(f"persistent://{ns}/s{i}").send(b"x")
    assert owners(cluster, ns)
    status, body, _ = http("PUT", f"{web}/admin/v2/namespaces/{ns}/unload")
    assert status == 204, body
    assert owners(cluster, ns) == {}
    cl.close()


# ---------------------------------------------------------------- failures
def test_zookeeper_away_past_the_session_timeout_every_broker_comes_back(cluster, zookeeper_server):
    """ZooKeeper unreachable for longer than the session timeout, then back: every broker's
    session is gone (its bundles with it); each re-registers on a new session, no restart."""
    ns = new_namespace(cluster, bundles=4)
    topic = f"persistent://{ns}/zk-away"
    stream = NumberedStream(cluster.service_url(), topic)
    try:
        stream.wait_acked(50)
        zookeeper_server.stop()
        time.sleep(SESSION_TIMEOUT_MS / 1000 * 2.5)
        zookeeper_server.start()
        deadline = time.monotonic() + 60
        want = sorted(b.broker_id for b in cluster.brokers)
        while True:
            try:
                status, listed, _ = http("GET", f"{cluster.brokers[0].web_url}/admin/v2/brokers/own-cluster")
            except OSError:
                status, listed = 0, None
            if status == 200 and sorted(listed) == want:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.3)
        stream.wait_acked(50, timeout_s=90)
    finally:
        stream.stop()
    assert all(b.proc.poll() is None for b in cluster.brokers)
    status, leader, _ = http("GET", f"{cluster.brokers[1].web_url}/admin/v2/brokers/leaderBroker")
    assert status == 200 and leader["brokerId"] in want
    assert stream.lost() == [], stream.explain()


def test_graceful_stop_of_an_owner_hands_its_bundles_over(cluster):
    """SIGTERM: the broker leaves the list, unloads its bundles (clients move), then exits 0."""
    ns = new_namespace(cluster, bundles=4)
    topic = f"persistent://{ns}/graceful"
    stream = NumberedStream(cluster.service_url(), topic)
    try:
        stream.wait_acked(50)
        leaving = owner_of_topic(cluster, topic)
        t0 = time.monotonic()
        assert leaving.terminate() == 0, leaving.log_tail()
        stream.wait_acked(1, timeout_s=60)
        handover_s = time.monotonic() - t0
        stream.wait_acked(50)
    finally:
        stream.stop()
    print(f"graceful stop: first acknowledged send on the new owner {handover_s:.2f} s after SIGTERM")
    assert owner_of_topic(cluster, topic) is not leaving
    assert stream.lost() == [], stream.explain()
    assert stream.stored_twice() == []
