"""The broker's namespace-policy cache: one store read per namespace, its own writes read back
at once, another broker's writes seen through the store's watch, absent namespaces cached."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker import errors
from magnetar.broker.resources import BrokerResources, tenant_info
from magnetar.broker.resources.namespaces import default_policies
from magnetar.metadata.api import NotificationType
from magnetar.metadata.memory import MemoryMetadataServer


class CountingStore:
    """The session, with its reads counted (the cache's only way to the store)."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.gets = 0

    async def get(self, path):
        self.gets += 1
        return await self._inner.get(path)

    def __getattr__(self, name):
        return getattr(self._inner, name)


async def _until(cond, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


@pytest.fixture
async def two_brokers():
    server = MemoryMetadataServer()
    s1, s2 = server.session(), server.session()
    counted = CountingStore(s1)
    mine = BrokerResources(counted, cached=True)  # type: ignore[arg-type]
    other = BrokerResources(s2)
    await other.tenants.create("t", tenant_info(["c"]))
    yield mine, other, counted
    await mine.aclose()
    await s1.aclose()
    await s2.aclose()


async def test_reads_hit_the_store_once_and_callers_get_their_own_copy(two_brokers) -> None:
    mine, other, counted = two_brokers
    notes = []
    counted.add_listener(notes.append)  # this broker's session, as the cache sees it
    await other.namespaces.create("t/a", default_policies(["c"]))
    path = mine.namespaces.path("t/a")

    async def creation_delivered() -> bool:  # (it would drop an entry cached before it)
        return any(n.type is NotificationType.CREATED and n.path == path for n in notes)

    await _until(creation_delivered)
    first = await mine.namespaces.get("t/a")
    reads = counted.gets
    for _ in range(20):
        assert (await mine.namespaces.get("t/a"))["replication_clusters"] == ["c"]
        assert await mine.namespaces.exists("t/a")
    assert counted.gets == reads  # all from the cache
    first["replication_clusters"].append("mutated")  # a caller's change stays its own
    assert (await mine.namespaces.get("t/a"))["replication_clusters"] == ["c"]


async def test_own_writes_are_read_back_at_once(two_brokers) -> None:
    mine, _, _ = two_brokers
    assert await mine.namespaces.get("t/b") is None  # absent: cached as absent
    await mine.namespaces.create("t/b", default_policies(["c"]))
    assert (await mine.namespaces.get("t/b")) is not None
    await mine.namespaces.update("t/b", lambda p: {**p, "message_ttl_in_seconds": 7})
    assert (await mine.namespaces.get("t/b"))["message_ttl_in_seconds"] == 7
    await mine.namespaces.delete("t/b")
    assert await mine.namespaces.get("t/b") is None
    assert not await mine.namespaces.exists("t/b")
    with pytest.raises(errors.NamespaceNotFoundError):
        await mine.namespaces.require("t/b")


async def test_another_brokers_writes_arrive_through_the_watch(two_brokers) -> None:
    mine, other, _ = two_brokers
    assert await mine.namespaces.get("t/c") is None
    await other.namespaces.create("t/c", default_policies(["c"]))  # created elsewhere
    await _until(lambda: mine.namespaces.exists("t/c"))
    assert (await mine.namespaces.get("t/c"))["message_ttl_in_seconds"] is None
    await other.namespaces.update("t/c", lambda p: {**p, "message_ttl_in_seconds": 9})

    async def ttl_is_9() -> bool:
        return (await mine.namespaces.get("t/c"))["message_ttl_in_seconds"] == 9

    await _until(ttl_is_9)
    await other.namespaces.delete("t/c")

    async def gone() -> bool:
        return not await mine.namespaces.exists("t/c")

    await _until(gone)
