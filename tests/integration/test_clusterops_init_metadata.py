"""``magnetar initialize-cluster-metadata`` against a real ZooKeeper, as an operator runs it.

It creates the cluster record, tenants ``public``/``pulsar`` with namespaces
``public/default`` and ``pulsar/system``, and BookKeeper's ledger layout; a
second run changes nothing it need not (INSTANCEID stays); a bad or unreachable
store URL is a one-line error, not a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pytestmark = [pytest.mark.zookeeper]


def _init(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli.main", "initialize-cluster-metadata", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


URLS = ("--web-service-url", "http://127.0.0.1:8080", "--broker-service-url", "pulsar://127.0.0.1:6650")


def test_initialize_creates_cluster_namespaces_and_layout_idempotently(zookeeper_server):
    from kazoo.client import KazooClient

    chroot = f"/init-{uuid.uuid4().hex[:8]}"
    url = f"zk:{zookeeper_server.hosts}{chroot}"
    first = _init(
        "--cluster",
        "east",
        "--metadata-store",
        url,
        *URLS,
        "--broker-service-url-tls",
        "pulsar+ssl://127.0.0.1:6651",
    )
    assert first.returncode == 0, first.stderr
    assert "Cluster metadata for 'east' setup correctly" in first.stdout
    zk = KazooClient(hosts=zookeeper_server.hosts + chroot)
    zk.start(timeout=15)
    try:
        cluster = json.loads(zk.get("/admin/clusters/east")[0])
        assert cluster["serviceUrl"] == "http://127.0.0.1:8080"
        assert cluster["brokerServiceUrl"] == "pulsar://127.0.0.1:6650"
        assert cluster["brokerServiceUrlTls"] == "pulsar+ssl://127.0.0.1:6651"
        assert sorted(zk.get_children("/admin/policies")) == ["public", "pulsar"]
        assert zk.exists("/admin/policies/public/default") and zk.exists("/admin/policies/pulsar/system")
        policies = json.loads(zk.get("/admin/policies/public/default")[0])
        assert policies["replication_clusters"] == ["east"]
        assert zk.exists("/ledgers/available/readonly")
        assert zk.get("/ledgers/LAYOUT")[0].startswith(b"2\n")
        instance = zk.get("/ledgers/INSTANCEID")[0]
        # Pulsar's older --zookeeper form (host:port, no scheme) works too; a rerun keeps INSTANCEID.
        again = _init("--cluster", "east", "--zookeeper", zookeeper_server.hosts + chroot, *URLS)
        assert again.returncode == 0, again.stderr
        assert zk.get("/ledgers/INSTANCEID")[0] == instance
    finally:
        zk.stop()
        zk.close()


def test_bad_store_url_is_a_clear_error():
    bad = _init("--cluster", "c", "--metadata-store", "nonsense", *URLS)
    assert bad.returncode == 2
    assert "has no scheme" in bad.stderr and "Traceback" not in bad.stderr
    unreachable = _init("--cluster", "c", "--metadata-store", "zk:127.0.0.1:1", "--timeout", "2", *URLS)
    assert unreachable.returncode == 1
    assert "could not connect to ZooKeeper" in unreachable.stderr and "Traceback" not in unreachable.stderr
    missing = _init("--cluster", "c", *URLS)
    assert missing.returncode == 2 and "--metadata-store" in missing.stderr
