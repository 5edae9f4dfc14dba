"""ConfigurationRoutedStore: shared paths go to the configuration store, the rest stays local."""

from __future__ import annotations

import asyncio

from magnetar.metadata.api import Notification
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.metadata.routing import ConfigurationRoutedStore


async def test_paths_are_routed_and_listings_merge() -> None:
    shared = MemoryMetadataServer(name="configuration")
    local_a, local_b = MemoryMetadataServer(name="a").session(), MemoryMetadataServer(name="b").session()
    a = ConfigurationRoutedStore(local_a, shared.session())
    b = ConfigurationRoutedStore(local_b, shared.session())

    await a.put("/admin/policies/t", b"{}")
    await a.put("/admin/clusters/A", b"{}")
    await a.put("/admin/partitioned-topics/t/ns/persistent/x", b'{"partitions":2}')
    await a.put("/admin/local-policies/t/ns", b"{}")  # per cluster: stays local
    await a.put("/managed-ledgers/t/ns/persistent/x", b"")

    assert (await b.get("/admin/policies/t")) is not None
    assert (await b.get("/admin/partitioned-topics/t/ns/persistent/x")) is not None
    assert await b.children("/admin/clusters") == ["A"]
    assert (await b.get("/admin/local-policies/t/ns")) is None
    assert (await b.get("/managed-ledgers/t/ns/persistent/x")) is None
    assert (await local_a.get("/admin/policies/t")) is None  # not written locally
    # A listing above the routed prefixes sees both stores.
    assert set(await a.children("/admin")) == {"clusters", "local-policies", "partitioned-topics", "policies"}
    assert a.is_configuration_path("/admin/policies") and not a.is_configuration_path("/admin/policiesX")


async def test_listeners_hear_both_stores() -> None:
    shared = MemoryMetadataServer(name="configuration")
    store = ConfigurationRoutedStore(MemoryMetadataServer(name="l").session(), shared.session())
    seen: list[Notification] = []
    store.add_listener(seen.append)
    await shared.session().put("/admin/policies/t2", b"{}")
    await store.put("/local/x", b"")
    for _ in range(50):  # notifications are delivered by the loop
        if len(seen) >= 2:
            break
        await asyncio.sleep(0.01)
    paths = {n.path for n in seen}
    assert "/admin/policies/t2" in paths and "/local/x" in paths
