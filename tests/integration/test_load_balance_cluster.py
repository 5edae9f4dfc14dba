"""Issue 17's must-show on real processes: the load manager spreads, grows, drains and isolates.

ZooKeeper, two bookies and three brokers (a fourth planned but held back), started by
:class:`~magnetar.testing.cluster.ClusterProcesses`.  The load manager runs with short
intervals set through Pulsar's keys (a shedding round every ~1.2 s, reports every 0.5 s)
and a small NIC limit (``loadBalancerOverrideBrokerNicSpeedGbps``) so a few dozen KB/s of
messages is real load; CPU and memory weights are 0 so only message traffic counts (two
cores are shared by every process of the test).

1. An isolation policy pins ``public/load`` (16 bundles) to broker-0; the official client
   produces to and consumes from 16 topics of it through broker-0's URL, all on broker-0.
2. The policy is deleted: the leader moves bundles until every broker of the three owns
   some (seen through ``ownedNamespaces`` of the admin API); its decisions, with their
   reasons, are in ``broker-stats/load-decisions``.
3. A fourth broker starts and receives bundles.
4. ``brokers shutdown`` drains broker-2: its bundles go to the others, the process exits.
5. Nothing the client had acknowledged is lost: every acknowledged message is consumed.
6. (second test) An isolation policy pins ``public/pinned`` to broker-1 with broker-3 as
   secondary; broker-1 is killed with ``kill -9``: the namespace fails over to broker-3,
   never to broker-0.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from magnetar.testing.cluster import ClusterProcesses, serving_cluster
from magnetar.testing.cluster import admin_call as http
from magnetar.testing.cluster import admin_ok as ok
from magnetar.testing.geo import poll
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]
CLUSTER = "lb"
SESSION_TIMEOUT_MS = 5000
TOPICS = 16
RATE_PER_TOPIC = 4  # messages/s
PAYLOAD = b"x" * 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper_server):
    yield from serving_cluster(
        tmp_path_factory.mktemp("loadbalance"),
        brokers=4,
        bookies=2,
        held=("broker-3",),
        cluster_name=CLUSTER,
        broker_properties={
            "metadataStoreSessionTimeoutMillis": str(SESSION_TIMEOUT_MS),
            "loadBalancerSheddingIntervalMinutes": "0.02",
            "loadBalancerReportUpdateMinIntervalMillis": "500",
            "loadBalancerSheddingGracePeriodMinutes": "0.25",
            "loadBalancerBundleUnloadMinThroughputThreshold": "0",
            "loadBalancerOverrideBrokerNicSpeedGbps": "0.001",
            "loadBalancerHistoryResourcePercentage": "0.3",
            "loadBalancerCPUResourceWeight": "0",
            "loadBalancerMemoryResourceWeight": "0",
            "loadBalancerDirectMemoryResourceWeight": "0",
            "lowerBoundarySheddingEnabled": "true",
            "loadBalancerAutoBundleSplitEnabled": "false",
        },
        zookeeper_url=zookeeper_server.url,  # the run's ZooKeeper; the cluster has its own chroot
    )


# ---------------------------------------------------------------- helpers
def broker_id(c: ClusterProcesses, i: int) -> str:
    return c.web_url(i).split("://", 1)[-1]


def owners(c: ClusterProcesses, namespace: str, alive: list[int]) -> dict[int, int]:
    """How many bundles of ``namespace`` each live broker owns (admin ownedNamespaces)."""
    out = {}
    for i in alive:
        status, body = http(
            "GET", f"{c.web_url(alive[0])}/admin/v2/brokers/{CLUSTER}/{broker_id(c, i)}/ownedNamespaces"
        )
        out[i] = sum(1 for k in body if k.startswith(namespace + "/")) if status == 200 else -1
    return out


def owners_when(c: ClusterProcesses, namespace: str, alive: list[int], test) -> dict[int, int] | None:  # noqa: ANN001
    o = owners(c, namespace, alive)
    return o if test(o) else None


def wait_until(what: str, cond, timeout_s: float = 60.0, every_s: float = 0.5):  # noqa: ANN001
    return poll(what, cond, timeout_s, every_s)


def set_policy(c: ClusterProcesses, name: str, doc: dict) -> None:
    ok(http("POST", f"{c.web_url(0)}/admin/v2/clusters/{CLUSTER}/namespaceIsolationPolicies/{name}", doc))


class Traffic:
    """Producers and consumers of the official client on every topic, until stopped."""

    def __init__(self, url: str, topics: list[str]) -> None:
        self.client = pulsar.Client(
            url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        self.acked: set[bytes] = set()
        self.received: set[bytes] = set()
        self.failed = 0
        self._lock = threading.Lock()
        self.consumers = [
            self.client.subscribe(t, "lb", message_listener=self._on_message, receiver_queue_size=100)
            for t in topics
        ]
        self.producers = [
            self.client.create_producer(
                t, batching_enabled=False, send_timeout_millis=120_000, max_pending_messages=10_000
            )
            for t in topics
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, daemon=True)
        self._thread.start()

    def _on_message(self, consumer, msg) -> None:  # noqa: ANN001
        with self._lock:
            self.received.add(msg.data()[:32])
        consumer.acknowledge(msg)

    def _produce(self) -> None:
        seq = 0
        while not self._stop.is_set():
            t0 = time.monotonic()
            for p in self.producers:
                key = f"{seq:012d}-{uuid.uuid4().hex[:19]}".encode()[:32]
                seq += 1

                def done(res, _mid, key=key) -> None:  # noqa: ANN001
                    with self._lock:
                        if res == pulsar.Result.Ok:
                            self.acked.add(key)
                        else:
                            self.failed += 1

                p.send_async(key + PAYLOAD, done)
            time.sleep(max(0.0, 1.0 / RATE_PER_TOPIC - (time.monotonic() - t0)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for p in self.producers:
            p.flush()

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------- the tests
def test_load_spreads_grows_and_drains_with_nothing_lost(cluster: ClusterProcesses) -> None:
    c = cluster
    web = c.web_url(0)
    ok(http("PUT", f"{web}/admin/v2/namespaces/public/load", {"bundles": {"numBundles": TOPICS}}))
    set_policy(c, "load-pin", {"namespaces": ["public/load"], "primary": [broker_id(c, 0)], "secondary": []})
    topics = [f"persistent://public/load/t-{i}" for i in range(TOPICS * 2)][: TOPICS * 2]
    traffic = Traffic(c.broker_url(0), topics[:TOPICS])
    try:
        # 1. everything on broker-0 (placement honours the pin)
        on = owners(c, "public/load", [0, 1, 2])
        assert on[1] == on[2] == 0 and on[0] > 0, on
        report = wait_until(  # a report interval or two: the load shows in broker-0's report
            "the traffic in broker-0's load report",
            lambda: (
                (r := ok(http("GET", f"{c.web_url(0)}/admin/v2/broker-stats/load-report")))
                and r["msgRateIn"] > 0
                and r["bandwidthIn"]["usage"] > 0
                and r
            ),
            timeout_s=30,
            every_s=0.3,
        )
        assert report["numBundles"] >= 1 and set(report["lastStats"]) == set(report["bundles"])

        # 2. the pin goes: the leader spreads the bundles over the three brokers
        ok(http("DELETE", f"{web}/admin/v2/clusters/{CLUSTER}/namespaceIsolationPolicies/load-pin"))
        t_spread = time.monotonic()
        spread = wait_until(
            "bundles spread over three brokers",
            lambda: owners_when(c, "public/load", [0, 1, 2], lambda o: min(o.values()) >= 2),
            timeout_s=60,
        )
        print(f"spread after {time.monotonic() - t_spread:.1f} s:", spread)
        leader = ok(http("GET", f"{web}/admin/v2/brokers/leaderBroker"))["serviceUrl"]
        stats = ok(http("GET", f"{leader}/admin/v2/broker-stats/load-decisions"))
        assert stats["leader"] is True and stats["counters"].get("bundles_unloaded", 0) >= 2, stats
        with urllib.request.urlopen(f"{leader}/metrics", timeout=60) as r:
            metrics = r.read().decode()
        unloads = [ln for ln in metrics.splitlines() if ln.startswith("pulsar_lb_unload_bundle_total{")]
        assert unloads and float(unloads[0].rsplit(" ", 1)[1]) >= 2, unloads
        assert "pulsar_lb_bandwidth_in_usage{" in metrics and "pulsar_bundle_msg_rate_in{" in metrics
        moves = [d for d in stats["decisions"] if d["kind"] == "unload"]
        assert moves and all("threshold" in d["reason"] or "lower boundary" in d["reason"] for d in moves), (
            moves
        )

        # 3. a fourth broker joins and receives bundles
        c.start_held("broker-3")
        joined = wait_until(
            "broker-3 owning bundles",
            lambda: owners_when(c, "public/load", [0, 1, 2, 3], lambda o: o[3] >= 1),
            timeout_s=60,
        )
        print("after join:", joined)

        # 4. broker-2 drained by `brokers shutdown`: bundles handed over, then the process exits
        before = owners(c, "public/load", [0, 1, 2, 3])
        ok(
            http(
                "POST", f"{c.web_url(2)}/admin/v2/brokers/shutdown?maxConcurrentUnloadPerSec=20", timeout_s=120
            )
        )
        wait_until("broker-2 exiting", lambda: not c.running("broker-2"), timeout_s=90)
        after = wait_until(
            "broker-2's bundles owned elsewhere",
            lambda: owners_when(
                c, "public/load", [0, 1, 3], lambda o: sum(o.values()) >= sum(before.values())
            ),
            timeout_s=60,
        )
        print("drain:", before, "->", after)
        time.sleep(2)
    finally:
        traffic.stop()
    try:
        # 5. nothing acknowledged is lost
        wait_until(
            "every acknowledged message consumed",
            lambda: traffic.acked <= traffic.received or None,
            timeout_s=60,
        )
        assert len(traffic.acked) >= TOPICS * 10, len(traffic.acked)
        print(f"acked {len(traffic.acked)}, received {len(traffic.received)}, failed sends {traffic.failed}")
    finally:
        traffic.close()


def test_isolation_pins_a_namespace_and_fails_over_to_the_secondary(cluster: ClusterProcesses) -> None:
    c = cluster
    alive = [i for i in range(4) if c.running(f"broker-{i}")]
    assert {1, 3} <= set(alive), alive
    web = c.web_url(0)
    ok(http("PUT", f"{web}/admin/v2/namespaces/public/pinned", {"bundles": {"numBundles": 4}}))
    set_policy(
        c,
        "pinned",
        {
            "namespaces": ["public/pinned"],
            "primary": [broker_id(c, 1)],
            "secondary": [broker_id(c, 3)],
            "auto_failover_policy": {
                "policy_type": "min_available",
                "parameters": {"min_limit": "1", "usage_threshold": "100"},
            },
        },
    )
    client = pulsar.Client(c.broker_url(0), operation_timeout_seconds=60)
    try:
        producers = [client.create_producer(f"persistent://public/pinned/p-{i}") for i in range(8)]
        for p in producers:
            p.send(b"before")
        on = owners(c, "public/pinned", alive)
        assert on[1] == sum(on.values()) > 0, on
        c.kill("broker-1")
        for p in producers:
            p.send(b"after")  # the client looks the topic up again and reconnects to the new owner
        rest = [i for i in alive if i != 1]
        on = wait_until(
            "public/pinned on the secondary",
            lambda: owners_when(c, "public/pinned", rest, lambda o: o[3] > 0),
            timeout_s=60,
        )
        assert on[0] == 0 and on[3] == sum(on.values()), on
    finally:
        client.close()
