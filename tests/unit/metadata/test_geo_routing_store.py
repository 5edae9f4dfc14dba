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


async def test_configuration_session_loss_does_not_take_ownership_locks() -> None:
    """A bundle-ownership lock (an ephemeral node of the local store) is lost with the local
    session only: the configuration store's session expiring leaves it held."""
    from magnetar.metadata.api import SessionEvent
    from magnetar.metadata.coordination.lock import DistributedLock

    shared, local = MemoryMetadataServer(name="configuration"), MemoryMetadataServer(name="local")
    config_session, local_session = shared.session(), local.session()
    store = ConfigurationRoutedStore(local_session, config_session)
    heard: list[SessionEvent] = []
    store.add_configuration_session_listener(heard.append)
    lock = DistributedLock(store, "/namespace/t/ns/0x00000000_0xffffffff", b"broker-1")
    assert await lock.try_acquire()

    shared.expire_session(config_session.session_id)
    for _ in range(50):
        if heard:
            break
        await asyncio.sleep(0.01)
    assert SessionEvent.SESSION_LOST in heard, "the configuration session's listeners hear it"
    await asyncio.sleep(0.05)
    assert lock.held, "a configuration-store session loss took a bundle lock"

    local.expire_session(local_session.session_id)
    lost = await lock.wait_lost(2.0)
    assert "session" in lost.reason
