from __future__ import annotations

import asyncio

import pytest

from magnetar.broker import errors
from magnetar.broker.resources import BrokerResources, initialize_cluster, tenant_info
from magnetar.broker.resources.namespaces import bundle_boundaries, default_policies
from magnetar.metadata.memory import MemoryMetadataServer


@pytest.fixture(params=[False, True], ids=["store", "cached"])
async def res(request):
    """Every test runs on the store directly and through the broker's namespace cache."""
    store = MemoryMetadataServer().session()
    r = BrokerResources(store, cached=request.param)
    yield r
    await r.aclose()
    await store.aclose()


async def test_initialize_cluster_creates_pulsars_defaults_once(res) -> None:
    await initialize_cluster(res, "standalone", "http://h:8080", "pulsar://h:6650")
    assert await res.clusters.list() == ["standalone"]
    assert (await res.clusters.get("standalone"))["brokerServiceUrl"] == "pulsar://h:6650"
    assert await res.tenants.get("public") == {"adminRoles": [], "allowedClusters": ["standalone"]}
    assert sorted(await res.namespaces.list("public")) == ["public/default"]
    assert await res.namespaces.exists("pulsar/system")
    pol = await res.namespaces.get("public/default")
    assert pol["replication_clusters"] == ["standalone"]
    assert pol["bundles"]["numBundles"] == 4
    # An operator's edit survives a restart; changed URLs are refreshed.
    await res.namespaces.update("public/default", lambda p: {**p, "message_ttl_in_seconds": 5})
    await initialize_cluster(res, "standalone", "http://h:9090", "pulsar://h:6651")
    assert (await res.namespaces.get("public/default"))["message_ttl_in_seconds"] == 5
    assert (await res.clusters.get("standalone"))["brokerServiceUrl"] == "pulsar://h:6651"


async def test_namespace_errors(res) -> None:
    with pytest.raises(errors.TenantNotFoundError):
        await res.namespaces.create("t/ns", default_policies(["c"]))
    await res.tenants.create("t", tenant_info(["c"]))
    await res.namespaces.create("t/ns", default_policies(["c"]))
    with pytest.raises(errors.AlreadyExistsError):
        await res.namespaces.create("t/ns", default_policies(["c"]))
    with pytest.raises(errors.AlreadyExistsError):
        await res.tenants.delete("t")  # still has a namespace
    with pytest.raises(errors.NamespaceNotFoundError):
        await res.namespaces.require("t/other")
    await res.namespaces.delete("t/ns")
    await res.tenants.delete("t")
    assert not await res.tenants.exists("t")


async def test_concurrent_policy_updates_are_not_lost(res) -> None:
    await res.tenants.create("t", tenant_info(["c"]))
    await res.namespaces.create("t/ns", default_policies(["c"]))

    async def bump(key: str) -> None:
        await res.namespaces.update("t/ns", lambda p: {**p, "properties": {**p["properties"], key: "1"}})

    await asyncio.gather(*(bump(f"k{i}") for i in range(10)))
    assert len((await res.namespaces.get("t/ns"))["properties"]) == 10


async def test_partitioned_topic_metadata(res) -> None:
    pt = res.partitioned_topics
    await pt.create("t", "ns", "persistent", "a/b", 3)
    assert await pt.partitions("t", "ns", "persistent", "a/b") == 3
    assert await pt.list("t", "ns", "persistent") == ["a/b"]
    with pytest.raises(errors.AlreadyExistsError):
        await pt.create("t", "ns", "persistent", "a/b", 3)
    await pt.update("t", "ns", "persistent", "a/b", 5)
    assert await pt.partitions("t", "ns", "persistent", "a/b") == 5
    assert await pt.delete("t", "ns", "persistent", "a/b")
    assert await pt.partitions("t", "ns", "persistent", "a/b") is None


def test_bundle_boundaries() -> None:
    assert bundle_boundaries(4) == ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]
    assert bundle_boundaries(1) == ["0x00000000", "0xffffffff"]
