"""Resource groups across brokers: each broker enforces its share of the group's quota.

ZooKeeper, two bookies and two brokers (:class:`~magnetar.testing.cluster.ClusterProcesses`).
A namespace with two bundles, one owned by each broker, is attached to a group with
publishRateInMsgs=200.  The rule (``broker.service.resource_groups``): each broker gets
ceil(quota / N), N = brokers owning bundles of the group's namespaces.  So:

* both brokers report a calculated quota of 100 (``/metrics``), and producers on a topic
  of each bundle (official client) together get ~200 msg/s, ~100 each;
* after the second bundle moves to broker-0 (unload with ``destinationBroker``), broker-0
  is the only owner and its share becomes the whole 200, without restarting anything.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from magnetar.broker.ownership.bundles import topic_hash
from magnetar.testing.cluster import ClusterProcesses, serving_cluster
from magnetar.testing.geo import poll
from magnetar.testing.standalone import broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]
CLUSTER = "rgroups"
NS = f"public/rg-{uuid.uuid4().hex[:6]}"
WAIT_S = 45.0  # every poll's deadline: ownership moves and metrics ticks on a loaded 2-core machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):  # noqa: ANN201
    yield from serving_cluster(
        tmp_path_factory.mktemp("rgroups"),
        brokers=2,
        bookies=2,
        cluster_name=CLUSTER,
        broker_properties={
            "managedLedgerDefaultEnsembleSize": "1",
            "managedLedgerDefaultWriteQuorum": "1",
            "managedLedgerDefaultAckQuorum": "1",
            "loadBalancerSheddingEnabled": "false",  # bundles stay where the test puts them
            "loadBalancerAutoBundleSplitEnabled": "false",
            "resourceUsageTransportPublishIntervalInSecs": "1",
        },
    )


def http(method: str, url: str, body: object = None, timeout: float = 60) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw and raw[:1] in b'[{"' else raw.decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, str(e)


def ok(status_body: tuple[int, object]) -> object:
    status, body = status_body
    assert status in (200, 204), body
    return body


def owner(c: ClusterProcesses, topic: str) -> int | None:
    status, body = http("GET", f"{c.web_url(0)}/lookup/v2/topic/persistent/{topic}")
    if status != 200 or not isinstance(body, dict):
        return None
    return next((i for i in range(c.n_brokers) if c.broker_url(i) == body.get("brokerUrl")), None)


def place(c: ClusterProcesses, topic: str, i: int) -> None:
    """Make broker ``i`` own ``topic``'s bundle (an unload with ``destinationBroker``)."""
    now = poll(f"an owner for {topic}", lambda: [o for o in [owner(c, topic)] if o is not None], WAIT_S)[0]
    if now == i:
        return
    bundle = ok(http("GET", f"{c.web_url(0)}/lookup/v2/topic/persistent/{topic}/bundle"))
    dest = urllib.parse.quote(c.web_url(i).split("://", 1)[-1])
    ok(http("PUT", f"{c.web_url(now)}/admin/v2/namespaces/{NS}/{bundle}/unload?destinationBroker={dest}"))
    poll(f"broker-{i} owning {topic}", lambda: owner(c, topic) == i, WAIT_S)


def topics_one_per_bundle(c: ClusterProcesses) -> list[str]:
    bounds = [
        int(b, 16) for b in ok(http("GET", f"{c.web_url(0)}/admin/v2/namespaces/{NS}/bundles"))["boundaries"]
    ]
    found: dict[int, str] = {}
    k = 0
    while len(found) < len(bounds) - 1:
        name = f"{NS}/t-{k}"
        h = topic_hash(f"persistent://{name}")
        found.setdefault(max(j for j in range(len(bounds) - 1) if bounds[j] <= h), name)
        k += 1
    return [found[j] for j in sorted(found)]


def quota_on(c: ClusterProcesses, i: int) -> float | None:
    status, text = http("GET", f"{c.web_url(i)}/metrics")
    if status != 200:
        return None
    m = re.search(
        r'pulsar_resource_group_calculated_messages_quota\{MonitoringClass="Publish",ResourceGroup="rg"\} (\S+)',
        str(text),
    )
    return float(m.group(1)) if m else None


def pump(producer, seconds: float, out: dict, key: str) -> None:  # noqa: ANN001
    acked = [0]

    def done(res, _mid) -> None:  # noqa: ANN001
        if res == pulsar.Result.Ok:
            acked[0] += 1

    end = time.monotonic() + seconds
    warm = time.monotonic() + 1.5
    start_count = None
    while time.monotonic() < end:
        if start_count is None and time.monotonic() >= warm:
            start_count = (acked[0], time.monotonic())
        producer.send_async(b"x" * 16, done)
    producer.flush()
    n0, t0 = start_count or (0, time.monotonic() - seconds)
    out[key] = (acked[0] - n0) / (time.monotonic() - t0)


def test_each_broker_enforces_its_share_of_the_group(cluster: ClusterProcesses) -> None:
    c = cluster
    ok(http("PUT", f"{c.web_url(0)}/admin/v2/namespaces/{NS}", {"bundles": {"numBundles": 2}}))
    ok(http("PUT", f"{c.web_url(0)}/admin/v2/resourcegroups/rg", {"publishRateInMsgs": 200}))
    ok(http("POST", f"{c.web_url(1)}/admin/v2/namespaces/{NS}/resourcegroup/rg"))
    topics = topics_one_per_bundle(c)
    for i, t in enumerate(topics):
        place(c, t, i)
    for i in range(2):
        poll(f"broker-{i}'s share of 100", lambda i=i: quota_on(c, i) == 100.0, WAIT_S)

    clients = [pulsar.Client(c.broker_url(i), operation_timeout_seconds=60) for i in range(2)]
    try:
        producers = [
            cl.create_producer(
                f"persistent://{t}",
                batching_enabled=True,  # small batches: thousands of msg/s unthrottled on a busy machine
                batching_max_messages=10,
                batching_max_publish_delay_ms=5,
                max_pending_messages=500,
                block_if_queue_full=True,
            )
            for cl, t in zip(clients, topics, strict=True)
        ]
        out: dict[str, float] = {}
        threads = [
            threading.Thread(target=pump, args=(p, 4.5, out, f"b{i}")) for i, p in enumerate(producers)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        print(f"cluster, group at 200 msg/s over 2 owners: {out} (sum {sum(out.values()):.0f})")
        assert 140 <= sum(out.values()) <= 250, out
        assert all(50 <= r <= 130 for r in out.values()), out  # ~100 each: the share, not 200

        place(c, topics[1], 0)  # broker-0 now owns both bundles
        poll("broker-0's share of the whole 200", lambda: quota_on(c, 0) == 200.0, WAIT_S)
        out.clear()
        pump(producers[1], 4.5, out, "moved")
        print(f"cluster, both bundles on broker-0: {out}")
        assert 140 <= out["moved"] <= 250, out
    finally:
        for cl in clients:
            cl.close()
