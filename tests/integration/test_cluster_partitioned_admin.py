"""Admin operations on a partitioned topic whose partitions three brokers own, through any broker.

Real processes (ZooKeeper, two bookies, three brokers, the proxy; :class:`ClusterProcesses`): a
topic of six partitions in a namespace of 16 bundles, so its partitions belong to at least two
brokers.  Every base-name operation -- partitioned stats and internal stats, subscriptions,
create / delete subscription, skip-all (clear-backlog), expire on all subscriptions, reset by
time, the namespace's clear-backlog and unsubscribe, unload, delete -- is asked of each broker's
web URL and of the proxy's in turn, and checked from another one: the broker that receives the
call fans out to the partitions' owners (``broker/admin/partition_fanout.py``).  ``magnetar
admin`` (the CLI) is run against a broker and against the proxy.  Problems are collected and
reported together, so a failure names every operation that answered wrong.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from magnetar.testing.cluster import serving_cluster
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
httpx = pytest.importorskip("httpx")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]
PARTITIONS = 6
PER_PARTITION = 5
TOTAL = PARTITIONS * PER_PARTITION


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper_server):
    yield from serving_cluster(
        tmp_path_factory.mktemp("padmin"),
        brokers=3,
        bookies=2,
        proxy=True,
        zookeeper_url=zookeeper_server.url,  # the run's ZooKeeper; the cluster has its own chroot
    )


_HTTP = httpx.Client(timeout=120, follow_redirects=True)


def _call(method: str, url: str, body: object = None) -> tuple[int, object]:
    """One admin request, 307s followed (as Pulsar's admin client does)."""
    r = _HTTP.request(method, url, json=body)
    try:
        return r.status_code, r.json() if r.content else None
    except ValueError:
        return r.status_code, r.text


def _cli(web_url: str, *args: str) -> object:
    cmd = [sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", web_url, "-o", "json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    try:
        return json.loads(done.stdout)
    except ValueError:
        return done.stdout  # an action prints nothing


def test_partitioned_topic_admin_through_every_broker_and_the_proxy(cluster):
    urls = {f"broker-{i}": cluster.web_url(i) for i in range(3)} | {"proxy": cluster.proxy_web_url}
    b0, b1, b2, proxy = urls.values()
    ns = f"public/pa-{uuid.uuid4().hex[:6]}"
    assert _call("PUT", f"{b0}/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": 16}})[0] == 204
    topic = f"persistent://{ns}/pt"
    base = f"/admin/v2/persistent/{ns}/pt"
    assert _call("PUT", f"{b0}{base}/partitions", PARTITIONS)[0] == 204

    client = pulsar.Client(
        cluster.service_url,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    problems: list[str] = []

    def check(what: str, ok: bool, got: object) -> None:
        if not ok:
            problems.append(f"{what}: {str(got)[:300]}")

    def backlog(url: str, sub: str = "s") -> object:
        status, st = _call("GET", f"{url}{base}/partitioned-stats")
        if status != 200 or not isinstance(st, dict):
            return (status, st)
        return st["subscriptions"].get(sub, {}).get("msgBacklog")

    def subscriptions(url: str) -> object:
        return _call("GET", f"{url}{base}/subscriptions")

    try:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(
            topic,
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for i in range(TOTAL):
            producer.send(f"m{i}".encode())
        consumer.close()
        owners = set()
        for i in range(PARTITIONS):
            status, look = _call("GET", f"{b0}/lookup/v2/topic/persistent/{ns}/pt-partition-{i}")
            assert status == 200, look
            owners.add(look["brokerUrl"])
        assert len(owners) >= 2, owners  # the point: the partitions have several owners

        # ---- reading: every broker and the proxy answer the whole topic
        for name, url in urls.items():
            status, st = _call("GET", f"{url}{base}/partitioned-stats")
            check(
                f"partitioned-stats via {name}",
                status == 200
                and len(st["partitions"]) == PARTITIONS
                and st["subscriptions"]["s"]["msgBacklog"] == TOTAL,
                (status, st),
            )
            status, ist = _call("GET", f"{url}{base}/partitioned-internalStats")
            check(
                f"partitioned-internalStats via {name}",
                status == 200
                and len(ist["partitions"]) == PARTITIONS
                and sum(p["numberOfEntries"] for p in ist["partitions"].values()) == TOTAL,
                (status, ist),
            )
            check(f"subscriptions via {name}", subscriptions(url) == (200, ["s"]), subscriptions(url))
        for name in ("broker-1", "proxy"):
            st = _cli(urls[name], "topics", "partitioned-stats", topic)
            check(
                f"magnetar admin partitioned-stats via {name}",
                isinstance(st, dict) and st["subscriptions"]["s"]["msgBacklog"] == TOTAL,
                st,
            )

        # ---- cursor moves on every partition, each asked of a different broker, seen from another
        def moved(what: str, method: str, url: str, seen_from: str, want: int) -> None:
            status, body = _call(method, url)
            seen = backlog(seen_from)
            check(what, status == 204 and seen == want, (status, body, seen))

        moved("skip_all (clear-backlog) via broker-1", "POST", f"{b1}{base}/subscription/s/skip_all", b2, 0)
        moved("reset by time via the proxy", "POST", f"{proxy}{base}/subscription/s/resetcursor/0", b0, TOTAL)
        clears = [  # each empties the backlog again after a reset to the start
            ("expire on all subscriptions via broker-2", f"{b2}{base}/all_subscription/expireMessages/0", b1),
            ("expire on one subscription via broker-1", f"{b1}{base}/subscription/s/expireMessages/0", b2),
            ("namespace clearBacklog via broker-1", f"{b1}/admin/v2/namespaces/{ns}/clearBacklog", b0),
            (
                "namespace clearBacklog/s via the proxy",
                f"{proxy}/admin/v2/namespaces/{ns}/clearBacklog/s",
                b2,
            ),
        ]
        for what, url, seen_from in clears:
            moved(what, "POST", url, seen_from, 0)
            _call("POST", f"{b0}{base}/subscription/s/resetcursor/0")
        out = _cli(b2, "topics", "clear-backlog", "-s", "s", topic)
        check("magnetar admin topics clear-backlog via broker-2", backlog(proxy) == 0, (out, backlog(proxy)))

        # ---- subscriptions created and deleted on every partition
        status, body = _call("PUT", f"{proxy}{base}/subscription/s2", {"ledgerId": -1, "entryId": -1})
        check(
            "create subscription via the proxy",
            status == 204 and subscriptions(b2) == (200, ["s", "s2"]),
            (status, body, subscriptions(b2)),
        )
        check(
            "a created subscription's backlog on every partition",
            backlog(b1, "s2") == TOTAL,
            backlog(b1, "s2"),
        )
        status, body = _call("PUT", f"{b2}{base}/subscription/s2")
        check("create an existing subscription via broker-2 is 409", status == 409, (status, body))
        status, body = _call("DELETE", f"{b0}{base}/subscription/s2")
        check(
            "delete subscription via broker-0",
            status == 204 and subscriptions(b1) == (200, ["s"]),
            (status, body, subscriptions(b1)),
        )
        status, body = _call("DELETE", f"{b0}{base}/subscription/nope")
        check("delete a missing subscription is 404", status == 404, (status, body))
        status, body = _call("POST", f"{b2}/admin/v2/namespaces/{ns}/unsubscribe/s")
        check(
            "namespace unsubscribe via broker-2",
            status == 204 and subscriptions(proxy) == (200, []),
            (status, body, subscriptions(proxy)),
        )

        # ---- unload: every partition closes on its owner (the producer's next send reconnects)
        def ledgers() -> object:  # each partition's current ledger (a reload opens a new one)
            status, ist = _call("GET", f"{b0}{base}/partitioned-internalStats")
            if status != 200 or not isinstance(ist, dict):
                return (status, ist)
            return [p["ledgers"][-1]["ledgerId"] for _, p in sorted(ist["partitions"].items())]

        before = ledgers()
        status, body = _call("PUT", f"{b2}{base}/unload")
        for i in range(PARTITIONS):  # each partition reloads (its managed ledger reopened)
            producer.send(f"after-unload-{i}".encode())
        after = ledgers()
        check(
            "unload via broker-2 closes every partition",
            status == 204
            and isinstance(after, list)
            and isinstance(before, list)
            and all(a != b for a, b in zip(after, before, strict=True)),
            (status, body, before, after),
        )

        # ---- delete: refused while a producer is connected, then done on every owner
        status, body = _call("DELETE", f"{b1}{base}/partitions")
        check("delete with a connected producer via broker-1 is 412", status == 412, (status, body))
        producer.close()
        status, body = _call("DELETE", f"{b1}{base}/partitions")
        check("delete via broker-1", status == 204, (status, body))
        deadline = time.monotonic() + 30
        while True:
            left = {
                name: [t for t in _call("GET", f"{url}/admin/v2/persistent/{ns}")[1] or [] if "/pt-" in t]
                for name, url in urls.items()
            }
            if not any(left.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        check("no partition left after delete", not any(left.values()), left)
        status, body = _call("GET", f"{b0}{base}/partitions")
        check("no partitioned metadata left", status == 200 and body.get("partitions") == 0, (status, body))
    finally:
        client.close()
    assert problems == [], "\n".join(problems)
