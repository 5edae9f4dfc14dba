"""A cluster of real processes: ``magnetar cluster up/status/down`` and the ClusterProcesses kit.

``cluster up --brokers 2 --bookies 2 --proxy`` starts ZooKeeper (Debian's
package), initialises the metadata, starts two bookies, two brokers,
auto-recovery and a proxy from config files it writes; the official client
produces and consumes through a broker's URL and through the proxy;
``status`` lists every process and what the metadata store says; ``down``
leaves no process behind.  The kit's faults (kill -9, SIGSTOP/SIGCONT,
restart with the same identity) work on a live cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import uuid

import pytest

from magnetar.app.cluster_launch import pid_alive
from magnetar.testing.cluster import ClusterProcesses
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.zookeeper import require_zookeeper, zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]
TIMEOUT_S = 15
KEEP_TOPIC = "persistent://public/default/cluster-kept"


def _magnetar(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=TIMEOUT_S, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def round_trip(url: str, n: int = 50, topic: str | None = None) -> None:
    c = client(url)
    try:
        topic = topic or f"persistent://public/default/cl-{uuid.uuid4().hex[:8]}"
        consumer = c.subscribe(topic, "s")
        producer = c.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=2)
        for i in range(n):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        got = [consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() for _ in range(n)]
        assert got == [f"m{i}".encode() for i in range(n)]
    finally:
        c.close()


def test_cluster_up_status_down(tmp_path):
    require_zookeeper()  # ``cluster up`` starts its own ZooKeeper from the Debian package
    data = tmp_path / "cluster"
    up = _magnetar("cluster", "up", "--brokers", "2", "--bookies", "2", "--proxy", "--data-dir", str(data))
    state = json.loads((data / "cluster.json").read_text()) if (data / "cluster.json").exists() else None
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        assert "service URL:       pulsar://127.0.0.1:" in up.stdout and "proxy service URL" in up.stdout
        assert state is not None
        by_name = {p["name"]: p for p in state["processes"]}
        assert {"zookeeper", "bookie-0", "bookie-1", "broker-0", "broker-1", "autorecovery", "proxy"} <= set(
            by_name
        )
        for p in state["processes"]:  # loopback only, one config file each
            if p["role"] in ("bookie", "broker", "proxy"):
                text = open(p["config"]).read()
                assert "127.0.0.1" in text and "0.0.0.0" not in text
        round_trip(by_name["broker-0"]["urls"]["serviceUrl"])
        round_trip(by_name["proxy"]["urls"]["serviceUrl"])
        c = client(by_name["broker-0"]["urls"]["serviceUrl"])
        c.subscribe(KEEP_TOPIC, "keep").close()  # a subscription keeps the data (no retention policy)
        c.create_producer(KEEP_TOPIC).send(b"kept across down and up")
        c.close()
        status = _magnetar("cluster", "status", "--data-dir", str(data), "--json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert all(p["running"] for p in report["processes"]), report
        assert all(p.get("healthy", True) for p in report["processes"]), report
        assert sum("healthy" in p for p in report["processes"]) == 5, report  # 2 bookies, 2 brokers, proxy
        assert len(report["metadata"]["bookies"]) == 2, report["metadata"]
        assert len(report["metadata"]["brokers"]) == 2, report["metadata"]  # registered, both
        assert report["metadata"]["leader"] is not None, report["metadata"]
        web_ids = {by_name[n]["urls"]["webServiceUrl"].split("://", 1)[1] for n in ("broker-0", "broker-1")}
        assert set(report["metadata"]["brokers"]) == web_ids, report["metadata"]
        # the round trips' topics live in public/default's bundles: their owners are listed
        default_bundles = {
            b: o for b, o in report["metadata"]["bundles"].items() if b.startswith("public/default/")
        }
        assert default_bundles, report["metadata"]["bundles"]
        broker_urls = {by_name[n]["urls"]["serviceUrl"] for n in ("broker-0", "broker-1")}
        assert all(o["nativeUrl"] in broker_urls for o in default_bundles.values()), default_bundles
        text = _magnetar("cluster", "status", "--data-dir", str(data))
        assert "broker-1" in text.stdout and "bookies available:" in text.stdout
        assert "bundle owners:" in text.stdout and "public/default/0x" in text.stdout, text.stdout
        again = _magnetar("cluster", "up", "--data-dir", str(data))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        down = _magnetar("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert state is not None
    left = [p["name"] for p in state["processes"] if pid_alive(p["pid"])]
    assert left == [], f"still running after down: {left}"
    after = _magnetar("cluster", "status", "--data-dir", str(data), "--json")
    assert after.returncode == 3 and not any(p["running"] for p in json.loads(after.stdout)["processes"])
    # up again on the same data dir: same ports and bookie ids (cookies match), the data is still there
    again = _magnetar("cluster", "up", "--brokers", "2", "--bookies", "2", "--data-dir", str(data))
    try:
        assert again.returncode == 0, again.stderr + again.stdout
        state2 = json.loads((data / "cluster.json").read_text())
        ports = {p["name"]: p.get("ports") for p in state2["processes"] if p["role"] != "zookeeper"}
        assert all(ports[n] == p.get("ports") for n, p in by_name.items() if n in ports)
        c = client(state2["service_url"].split(",")[0])
        try:
            consumer = c.subscribe(KEEP_TOPIC, "keep")
            assert consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() == b"kept across down and up"
        finally:
            c.close()
    finally:
        assert _magnetar("cluster", "down", "--data-dir", str(data)).returncode == 0


def _topic_owned_by(cluster: ClusterProcesses, i: int) -> str:
    """A fresh topic whose bundle broker ``i`` owns (looked up through broker ``i``)."""
    want = cluster.broker_url(i)
    for _ in range(64):
        topic = f"persistent://public/default/cl-{uuid.uuid4().hex[:8]}"
        url = f"{cluster.web_url(i)}/lookup/v2/topic/{topic.replace('://', '/')}"
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            owner = json.loads(resp.read())["brokerUrl"]
        if owner == want:
            return topic
    raise AssertionError(f"no topic of 64 tried is owned by broker-{i}")


def test_cluster_kit_faults(tmp_path, zookeeper_server):
    with ClusterProcesses(
        tmp_path / "kit", brokers=2, bookies=2, zookeeper_url=zookeeper_server.url
    ) as cluster:
        round_trip(cluster.broker_url(0), 20)
        # SIGSTOP: broker-1 is frozen (sockets open, nothing answers); broker-0 serves on the
        # topics it owns (a bundle broker-1 owns stays unreachable until its session expires,
        # as in Pulsar), so the topic used is one whose owner broker-0 is
        topic = _topic_owned_by(cluster, 0)
        cluster.pause("broker-1")
        try:
            round_trip(cluster.broker_url(0), 20, topic)
        finally:
            cluster.resume("broker-1")
        round_trip(cluster.broker_url(1), 20)
        # kill -9 a bookie: it is gone at once; restarted with the same config it has the same id
        bookie_id = cluster.ready["bookie-1"][0]
        old_pid = cluster.pid("bookie-1")
        cluster.kill("bookie-1")
        assert not cluster.running("bookie-1") and not pid_alive(old_pid)
        cluster.restart("bookie-1")
        assert cluster.ready["bookie-1"][0] == bookie_id and cluster.pid("bookie-1") != old_pid
        # kill -9 a broker and bring it back on its ports
        cluster.restart("broker-1", kill=True)
        round_trip(cluster.broker_url(1), 20)
        pids = [cluster.pid(n) for n in cluster.procs]
    assert not any(pid_alive(p) for p in pids)
    assert os.path.isdir(tmp_path / "kit" / "broker-0")


def test_proxy_client_survives_broker_kill(tmp_path, zookeeper_server):
    """Through the proxy, a producer whose broker is killed with kill -9 gets acknowledgements
    again from another broker (the proxy's lookup link to the dead broker fails over too)."""
    import threading
    import time

    with ClusterProcesses(
        tmp_path / "px",
        brokers=2,
        bookies=2,
        zookeeper_url=zookeeper_server.url,
        proxy=True,
        # the dead broker's bundles move when its session expires: 3 s, not Pulsar's 30 s default
        broker_properties={"metadataStoreSessionTimeoutMillis": "3000"},
    ) as cluster:
        # the kit's proxy bound port 0 (no port picked early and taken meanwhile) and its config
        # now names the ports it got, so a restart keeps its URLs
        assert (cluster.proxy_url, cluster.proxy_web_url) == cluster.ready["proxy"]
        conf = cluster.specs["proxy"].config_path.read_text()
        assert f"servicePort={cluster.proxy_url.rsplit(':', 1)[1]}" in conf.splitlines(), conf
        c = client(cluster.proxy_url)
        try:
            topic = f"persistent://public/default/pxkill-{uuid.uuid4().hex[:8]}"
            producer = c.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
            producer.send(b"before")
            victim = next(
                n
                for n in cluster.names("broker")
                if cluster.web_url(int(n[-1])) and _serves(cluster, n, topic)
            )
            acked = threading.Event()

            def on_sent(res, _mid) -> None:  # type: ignore[no-untyped-def]
                if res == pulsar.Result.Ok:
                    acked.set()

            cluster.kill(victim)
            deadline = time.monotonic() + 45
            while not acked.is_set() and time.monotonic() < deadline:
                producer.send_async(b"after", on_sent)
                acked.wait(0.2)
            assert acked.is_set(), f"no acknowledged send through the proxy after kill -9 {victim}"
            producer.close()
        finally:
            c.close()


def _serves(cluster: ClusterProcesses, name: str, topic: str) -> bool:
    """Whether broker ``name`` has the topic loaded (its topic stats answer 200)."""
    import urllib.error
    import urllib.request

    path = "/admin/v2/" + topic.replace("://", "/") + "/stats"
    try:
        # 60 s: a broker builds its admin routes on the first request (seconds on a loaded machine)
        with urllib.request.urlopen(cluster.web_url(int(name[-1])) + path, timeout=60) as r:
            return r.status == 200
    except urllib.error.HTTPError:
        return False
