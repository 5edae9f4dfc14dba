"""``magnetar cluster status``: what it reads from the metadata store and how it prints it.

The registration and ownership documents here are in Pulsar's shapes (LocalBrokerData
under ``/loadbalance/brokers``, LeaderBroker at ``/loadbalance/leader``,
NamespaceEphemeralData under ``/namespace/{tenant}/{ns}/{range}``), the ones the
broker writes once bundle ownership is in the build.
"""

from __future__ import annotations

import json

from magnetar.cli.cluster import _print_status, collect_cluster_metadata
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock


async def test_status_lists_bookies_brokers_leader_and_bundle_owners(capsys):
    store = MemoryMetadataServer(clock=RealClock()).session()
    empty = await collect_cluster_metadata(store)
    assert empty == {"bookies": [], "readonly_bookies": [], "brokers": {}, "leader": None, "bundles": {}}
    await store.put("/ledgers/available/127.0.0.1:3181", b"", ephemeral=True)
    await store.put("/ledgers/available/readonly", b"")
    for port in (8080, 8081):
        doc = {
            "webServiceUrl": f"http://127.0.0.1:{port}",
            "pulsarServiceUrl": f"pulsar://127.0.0.1:{port - 1430}",
        }
        await store.put(f"/loadbalance/brokers/127.0.0.1:{port}", json.dumps(doc).encode(), ephemeral=True)
    await store.put("/loadbalance/leader", json.dumps({"serviceUrl": "http://127.0.0.1:8080"}).encode())
    await store.put("/namespace/public", b"")  # an intermediate node is not a bundle
    owner = {"nativeUrl": "pulsar://127.0.0.1:6651", "httpUrl": "http://127.0.0.1:8081", "disabled": False}
    await store.put("/namespace/public/default/0x00000000_0x40000000", json.dumps(owner).encode())
    md = await collect_cluster_metadata(store)
    assert md["bookies"] == ["127.0.0.1:3181"]
    assert sorted(md["brokers"]) == ["127.0.0.1:8080", "127.0.0.1:8081"]
    assert list(md["bundles"]) == ["public/default/0x00000000_0x40000000"]
    _print_status({"cluster": "c", "processes": [], "metadata": md})
    out = capsys.readouterr().out
    assert "brokers registered under /loadbalance/brokers: 127.0.0.1:8080, 127.0.0.1:8081" in out
    assert "leader: http://127.0.0.1:8080" in out
    assert "public/default/0x00000000_0x40000000" in out and "pulsar://127.0.0.1:6651" in out
    await store.aclose()
