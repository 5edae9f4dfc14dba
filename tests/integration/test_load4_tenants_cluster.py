"""Issue 17, isolation between tenants on shared brokers and bookies, on real processes.

ZooKeeper, five bookies and two brokers (:class:`~magnetar.testing.cluster.ClusterProcesses`),
ledgers at E/Qw/Qa 2/2/2 rolled every 10 entries, the official client.

* Bookie affinity groups: bookie-0/1/2 are group ``ga``, bookie-3/4 group ``gb``
  (``bookies set-bookie-rack --group``); tenant ``ta``'s namespace has affinity ``ga``,
  tenant ``tb``'s ``gb``.  Every ledger of their topics (read from the metadata store)
  has every ensemble inside its namespace's group, also after a ``ga`` bookie of an open
  ledger stops under the producer (the ensemble change stays in the group).
* Limits that protect neighbours: ``ta``'s namespace (two bundles, one owned by each
  broker) gets maxProducersPerTopic, maxConsumersPerTopic, dispatchRate and publishRate;
  they are enforced on both brokers, while ``tb``'s topics on the same brokers are not
  limited by them.
* Dynamic configuration: ``update-dynamic-config`` on one broker reaches the other one
  (its runtime config and its behaviour: a second producer refused on a topic it owns),
  for a load-manager key too; deleting it reaches it as well.
* ``magnetar admin broker-stats load-decisions`` prints a broker's placements and why.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.broker.ownership.bundles import topic_hash
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock
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
CLUSTER = "tenants"
RUN = uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper_server):
    yield from serving_cluster(
        tmp_path_factory.mktemp("tenants"),
        brokers=2,
        bookies=5,
        cluster_name=CLUSTER,
        broker_properties={
            "managedLedgerDefaultEnsembleSize": "2",
            "managedLedgerDefaultWriteQuorum": "2",
            "managedLedgerDefaultAckQuorum": "2",
            "managedLedgerMaxEntriesPerLedger": "10",
            "managedLedgerMinLedgerRolloverTimeMinutes": "0",
            "loadBalancerSheddingEnabled": "false",  # bundles stay where the test puts them
        },
        zookeeper_url=zookeeper_server.url,  # the run's ZooKeeper; the cluster has its own chroot
    )


# ---------------------------------------------------------------- helpers
def wait_until(what: str, cond, timeout_s: float = 30.0, every_s: float = 0.25):  # noqa: ANN001
    return poll(what, cond, timeout_s, every_s)


def broker_id(c: ClusterProcesses, i: int) -> str:
    return c.web_url(i).split("://", 1)[-1]


def tenant(c: ClusterProcesses, name: str) -> None:
    status, body = http("PUT", f"{c.web_url(0)}/admin/v2/tenants/{name}", {"allowedClusters": [CLUSTER]})
    assert status in (204, 409), body


def namespace(c: ClusterProcesses, ns: str, bundles: int = 1) -> None:
    ok(http("PUT", f"{c.web_url(0)}/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": bundles}}))


def owner(c: ClusterProcesses, topic: str) -> int | None:
    status, body = http("GET", f"{c.web_url(0)}/lookup/v2/topic/persistent/{topic}")
    if status != 200:
        return None
    return next((i for i in range(c.n_brokers) if c.broker_url(i) == body.get("brokerUrl")), None)


def place(c: ClusterProcesses, topic: str, i: int) -> None:
    """Make broker ``i`` own ``topic``'s bundle (an unload with ``destinationBroker``)."""
    ns = topic.rsplit("/", 1)[0]
    now = wait_until(f"an owner for {topic}", lambda: [o for o in [owner(c, topic)] if o is not None])[0]
    if now == i:
        return
    status, bundle = http("GET", f"{c.web_url(0)}/lookup/v2/topic/persistent/{topic}/bundle")
    assert status == 200, bundle
    dest = urllib.parse.quote(broker_id(c, i))
    ok(http("PUT", f"{c.web_url(now)}/admin/v2/namespaces/{ns}/{bundle}/unload?destinationBroker={dest}"))
    wait_until(f"broker-{i} owning {topic}", lambda: owner(c, topic) == i)


def topics_one_per_bundle(c: ClusterProcesses, ns: str, stem: str) -> list[str]:
    """One topic name of ``ns`` in each of its bundles (by the bundle hash)."""
    bounds = [
        int(b, 16) for b in ok(http("GET", f"{c.web_url(0)}/admin/v2/namespaces/{ns}/bundles"))["boundaries"]
    ]
    found: dict[int, str] = {}
    k = 0
    while len(found) < len(bounds) - 1:
        name = f"{ns}/{stem}-{k}"
        h = topic_hash(f"persistent://{name}")
        found.setdefault(max(j for j in range(len(bounds) - 1) if bounds[j] <= h), name)
        k += 1
    return [found[j] for j in sorted(found)]


async def _ensembles(url: str, ledger_ids: list[int]) -> dict[int, list[tuple[str, ...]]]:
    store = await create_metadata_store(url, clock=RealClock())
    try:
        ml = LedgerMetadataStore(store)
        return {lid: [ens for _, ens in (await ml.read(lid))[0].ensembles] for lid in ledger_ids}
    finally:
        await store.aclose()


def ledger_ids(c: ClusterProcesses, topic: str) -> list[int]:
    stats = ok(http("GET", f"{c.web_url(0)}/admin/v2/persistent/{topic}/internalStats"))
    return [lg["ledgerId"] for lg in stats["ledgers"]]


def sends_in(producer, seconds: float, out: dict, key: str) -> None:  # noqa: ANN001
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        producer.send(b"p")
        n += 1
    out[key] = n


def receives_in(consumer, seconds: float, out: dict, key: str) -> None:  # noqa: ANN001
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            consumer.acknowledge(consumer.receive(100))
            n += 1
        except pulsar.Timeout:
            pass
    out[key] = n


def concurrently(jobs: list) -> None:  # noqa: ANN001
    threads = [threading.Thread(target=fn, args=args) for fn, *args in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


# ---------------------------------------------------------------- bookie affinity
def test_bookie_affinity_groups_keep_each_namespace_on_its_bookies(cluster: ClusterProcesses) -> None:
    """Also when a bookie of the group stops under a producer: the ensemble change replaces it
    with the group's last bookie, never with one of the other group."""
    c = cluster
    web = c.web_url(0)
    names = {c.ready[f"bookie-{i}"][0]: f"bookie-{i}" for i in range(c.n_bookies)}
    bookies = list(names)
    groups = {"ga": set(bookies[:3]), "gb": set(bookies[3:])}
    for group, members in groups.items():
        for b in members:
            ok(http("POST", f"{web}/admin/v2/bookies/racks-info/{b}?group={group}", {"rack": f"/{group}"}))
    spaces = {"ga": f"ta-{RUN}/aff", "gb": f"tb-{RUN}/aff"}
    client = pulsar.Client(c.service_url, operation_timeout_seconds=60)
    try:
        topics: dict[str, list[str]] = {}
        for group, ns in spaces.items():
            tenant(c, ns.split("/")[0])
            namespace(c, ns)
            body = {"bookkeeperAffinityGroupPrimary": group, "bookkeeperAffinityGroupSecondary": ""}
            ok(http("POST", f"{web}/admin/v2/namespaces/{ns}/persistence/bookieAffinity", body))
            topics[group] = [f"{ns}/t"]
        producers = {}
        for group_topics in topics.values():
            for t in group_topics:
                producers[t] = client.create_producer(
                    f"persistent://{t}", batching_enabled=False, send_timeout_millis=60_000
                )
                for i in range(25):  # ledgers at 10 entries each: the third is open
                    producers[t].send_async(b"m-%d" % i, None)
                producers[t].flush()
        # a ga bookie of ta's open ledger stops; ta keeps producing
        first = topics["ga"][0]
        open_ensemble = asyncio.run(_ensembles(c.metadata_url, ledger_ids(c, first)[-1:]))
        victim = sorted(next(iter(open_ensemble.values()))[-1])[0]
        assert c.terminate(names[victim]) == 0
        for t in topics["ga"]:
            for i in range(25, 40):
                producers[t].send_async(b"m-%d" % i, None)
            producers[t].flush()
        for group, group_topics in topics.items():
            for t in group_topics:
                ids = ledger_ids(c, t)
                assert len(ids) >= 2, (t, ids)
                ensembles = asyncio.run(_ensembles(c.metadata_url, ids))
                on = {b for ens in ensembles.values() for e in ens for b in e}
                assert on <= groups[group], f"{t} (affinity {group}) has ledgers on {on - groups[group]}"
                print(f"{t}: ledgers {ids} on {sorted(on)}: {ensembles}")
        after = asyncio.run(_ensembles(c.metadata_url, ledger_ids(c, first)))
        last = [e for ens in after.values() for e in ens][-1]
        assert victim not in last and set(last) == groups["ga"] - {victim}, (victim, after)
        for p in producers.values():
            p.close()
    finally:
        client.close()
        for b in bookies:
            http("DELETE", f"{web}/admin/v2/bookies/racks-info/{b}")


# ---------------------------------------------------------------- limits between tenants
def test_a_tenants_limits_hold_on_every_broker_and_spare_its_neighbour(cluster: ClusterProcesses) -> None:
    c = cluster
    web = c.web_url(0)
    limited, free = f"ta-{RUN}/lim", f"tb-{RUN}/free"
    for ns in (limited, free):
        tenant(c, ns.split("/")[0])
        namespace(c, ns, bundles=2)
    ta, tb = topics_one_per_bundle(c, limited, "t"), topics_one_per_bundle(c, free, "t")
    for i in range(2):  # each broker owns one bundle of each tenant
        place(c, ta[i], i)
        place(c, tb[i], i)
    base = f"{web}/admin/v2/namespaces/{limited}"
    ok(http("POST", f"{base}/maxProducersPerTopic", 1))
    ok(http("POST", f"{base}/maxConsumersPerTopic", 1))
    ok(
        http(
            "POST",
            f"{base}/dispatchRate",
            {"dispatchThrottlingRateInMsg": 5, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1},
        )
    )
    # one client per tenant, as two applications have: Pulsar throttles publishing by pausing
    # reads on the producer's connection, which every producer of one client shares
    clients = {"ta": pulsar.Client(c.service_url, operation_timeout_seconds=60)}
    clients["tb"] = pulsar.Client(c.service_url, operation_timeout_seconds=60)
    try:
        producers, consumers = {}, {}
        for t in ta + tb:
            client = clients[t.split("-")[0]]
            producers[t] = client.create_producer(f"persistent://{t}", batching_enabled=False)
            consumers[t] = client.subscribe(
                f"persistent://{t}", "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10
            )
        # producers and consumers: the limited tenant's second one is refused on both brokers
        client = clients["ta"]
        for t in ta:
            with pytest.raises(pulsar.ProducerBusy):
                client.create_producer(f"persistent://{t}")
            with pytest.raises(pulsar.ConsumerBusy):
                client.subscribe(f"persistent://{t}", "s", consumer_type=pulsar.ConsumerType.Shared)
        client = clients["tb"]
        extra = [client.create_producer(f"persistent://{t}") for t in tb for _ in range(2)]
        extra += [
            client.subscribe(f"persistent://{t}", "s", consumer_type=pulsar.ConsumerType.Shared)
            for t in tb
            for _ in range(2)
        ]
        # the neighbour's extra ones were let in; they go (shared: they would split the backlog)
        for x in extra:
            x.close()
        # dispatch: a backlog of 60 on each topic, drained for 2.5 s
        for t in ta + tb:
            for i in range(60):
                producers[t].send_async(b"d-%d" % i, None)
            producers[t].flush()
        got: dict[str, int] = {}
        concurrently([(receives_in, consumers[t], 2.5, got, t) for t in ta + tb])
        print("received in 2.5 s:", got)
        for t in ta:
            assert got[t] <= 5 * 4 + 10, (t, got)  # 5/s: at most ~4 windows, plus the prefetch
        for t in tb:
            assert got[t] >= 40, (t, got)
        # publish: 5 msg/s on the limited tenant's namespace
        ok(
            http(
                "POST",
                f"{base}/publishRate",
                {"publishThrottlingRateInMsg": 5, "publishThrottlingRateInByte": -1},
            )
        )
        time.sleep(1)  # the policy reaches the topics of both owners
        sent: dict[str, int] = {}
        concurrently([(sends_in, producers[t], 2.5, sent, t) for t in ta + tb])
        print("sent in 2.5 s:", sent)
        for t in ta:
            assert sent[t] <= 5 * 4 + 3, (t, sent)
        for t in tb:
            assert sent[t] >= 40, (t, sent)
    finally:
        for cl in clients.values():
            cl.close()


# ---------------------------------------------------------------- dynamic configuration
def runtime(c: ClusterProcesses, i: int) -> dict:
    return ok(http("GET", f"{c.web_url(i)}/admin/v2/brokers/configuration/runtime"))


def test_dynamic_config_reaches_every_broker(cluster: ClusterProcesses) -> None:
    c = cluster
    tenant(c, f"tc-{RUN}")
    namespace(c, f"tc-{RUN}/dyn")
    t = f"tc-{RUN}/dyn/t"
    client = pulsar.Client(c.service_url, operation_timeout_seconds=60)
    try:
        first = client.create_producer(f"persistent://{t}")
        place(c, t, 1)
        second = client.create_producer(f"persistent://{t}")  # no limit yet
        second.close()
        ok(http("POST", f"{c.web_url(0)}/admin/v2/brokers/configuration/maxProducersPerTopic/1"))
        ok(
            http(
                "POST",
                f"{c.web_url(0)}/admin/v2/brokers/configuration/loadBalancerBrokerOverloadedThresholdPercentage/77",
            )
        )
        try:
            wait_until(
                "broker-1 applying broker-0's dynamic config",
                lambda: (
                    runtime(c, 1)["maxProducersPerTopic"] == "1"
                    and runtime(c, 1)["loadBalancerBrokerOverloadedThresholdPercentage"] == "77"
                ),
            )
            assert ok(http("GET", f"{c.web_url(1)}/admin/v2/brokers/configuration/values")) == {
                "maxProducersPerTopic": "1",
                "loadBalancerBrokerOverloadedThresholdPercentage": "77",
            }
            with pytest.raises(pulsar.ProducerBusy):  # enforced by broker-1, which owns the topic
                client.create_producer(f"persistent://{t}")
        finally:
            ok(http("DELETE", f"{c.web_url(0)}/admin/v2/brokers/configuration/maxProducersPerTopic"))
            ok(
                http(
                    "DELETE",
                    f"{c.web_url(0)}/admin/v2/brokers/configuration/loadBalancerBrokerOverloadedThresholdPercentage",
                )
            )
        wait_until(
            "broker-1 dropping the deleted overrides",
            lambda: (
                runtime(c, 1)["maxProducersPerTopic"] == "0"
                and runtime(c, 1).get("loadBalancerBrokerOverloadedThresholdPercentage") in (None, "85")
            ),
        )
        client.create_producer(f"persistent://{t}").close()
        first.close()
    finally:
        client.close()


def test_load_decisions_cli_prints_the_placements(cluster: ClusterProcesses) -> None:
    c = cluster
    tenant(c, f"tc-{RUN}")
    namespace(c, f"tc-{RUN}/dec", bundles=4)
    for k in range(4):
        owner(c, f"tc-{RUN}/dec/t-{k}")  # lookups on broker-0: its load manager places the bundles
    cmd = [sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", c.web_url(0)]
    r = subprocess.run(
        [*cmd, "broker-stats", "load-decisions", "--kind", "place"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] in ("leader: true", "leader: false"), r.stdout
    placed = [ln for ln in lines if " place " in ln and f"tc-{RUN}/dec/" in ln]
    assert placed and all("->" in ln and ": " in ln for ln in placed), r.stdout
    r = subprocess.run(
        [*cmd, "-o", "json", "broker-stats", "load-decisions", "--last", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc["leader"], bool) and len(doc["decisions"]) == 1, doc
