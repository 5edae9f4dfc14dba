"""``magnetar broker`` (the cluster assembly) with a configuration store (issue 18).

A real ZooKeeper holds two chroots: the broker's local metadata store
(``--metadata-url``) and the instance's configuration store
(``configurationMetadataStoreUrl``).  A tenant and a namespace written only to
the configuration store (as another cluster's broker would have written them)
are what the broker's admin API lists; the broker registers its own cluster
there, and nothing of the configuration lands in the local store.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 -- fixture

pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]


class ClusterBrokerProcess(StandaloneProcess):
    """``magnetar broker --metadata-url ...`` with the standalone helper's ready-line handling."""

    def __init__(self, data_dir, metadata_url: str, config_file) -> None:  # noqa: ANN001
        super().__init__(data_dir, config_file=config_file)
        self.metadata_url = metadata_url

    def command(self, broker_port: int = 0, web_port: int = 0) -> list[str]:
        cmd = super().command(broker_port, web_port)
        cmd[cmd.index("standalone")] = "broker"
        return cmd + ["--metadata-url", self.metadata_url]


def get(url: str):  # noqa: ANN201
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


async def _store_ops(url: str, writes: dict[str, dict], reads: list[str]) -> dict[str, bool]:
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await create_metadata_store(url, clock=RealClock())
    try:
        for path, doc in writes.items():
            await store.put(path, json.dumps(doc).encode())
        return {path: await store.exists(path) is not None for path in reads}
    finally:
        await store.aclose()


def test_cluster_broker_reads_tenants_and_namespaces_from_the_configuration_store(tmp_path, zookeeper_server):  # noqa: ANN001, F811
    tag = uuid.uuid4().hex[:8]
    local_url = f"zk:{zookeeper_server.hosts}/local-{tag}"
    config_url = f"zk:{zookeeper_server.hosts}/config-{tag}"
    tenant = f"shared-{tag}"
    asyncio.run(
        _store_ops(
            config_url,
            {
                f"/admin/policies/{tenant}": {"adminRoles": [], "allowedClusters": ["east"]},
                f"/admin/policies/{tenant}/ns": {"replication_clusters": ["east"]},
            },
            [],
        )
    )
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"clusterName=east\nconfigurationMetadataStoreUrl={config_url}\nfunctionsWorkerEnabled=false\n"
    )
    broker = ClusterBrokerProcess(tmp_path / "broker", local_url, conf)
    try:
        broker.start(timeout_s=60)
        assert tenant in get(f"{broker.web_url}/admin/v2/tenants")
        assert get(f"{broker.web_url}/admin/v2/tenants/{tenant}")["allowedClusters"] == ["east"]
        assert f"{tenant}/ns" in get(f"{broker.web_url}/admin/v2/namespaces/{tenant}")
        assert get(f"{broker.web_url}/admin/v2/namespaces/{tenant}/ns/replication") == ["east"]
        assert "east" in get(f"{broker.web_url}/admin/v2/clusters")
    finally:
        code = broker.terminate()
    assert code == 0, broker.log_tail()
    # The cluster registered itself in the configuration store, not in the local one.
    seen_config = asyncio.run(_store_ops(config_url, {}, ["/admin/clusters/east"]))
    seen_local = asyncio.run(_store_ops(local_url, {}, ["/admin/clusters/east", f"/admin/policies/{tenant}"]))
    assert seen_config == {"/admin/clusters/east": True}
    assert seen_local == {"/admin/clusters/east": False, f"/admin/policies/{tenant}": False}
