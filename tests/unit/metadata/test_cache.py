"""MetadataCache on the memory backend: read-through, invalidation, bounds, serdes, CAS."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from magnetar.metadata.api import BadVersion, GetResult, NotFound
from magnetar.metadata.cache import (
    BytesSerde,
    DataclassJsonSerde,
    JsonSerde,
    MetadataCache,
    MetadataSerdeError,
)
from magnetar.metadata.memory import MemoryMetadataServer


@dataclass
class TenantInfo:
    admin_roles: list[str]
    allowed_clusters: list[str]
    comment: str | None = None


class CountingStore:
    """Wraps a store and counts gets (the cache must not go to the store on hits)."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.gets = 0

    async def get(self, path: str) -> GetResult | None:
        self.gets += 1
        await asyncio.sleep(0)
        return await self._inner.get(path)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_serdes_write_json_as_pulsar_does() -> None:
    serde = DataclassJsonSerde(TenantInfo)
    raw = serde.serialize(TenantInfo(["admin"], ["standalone"]))
    assert raw == b'{"adminRoles":["admin"],"allowedClusters":["standalone"]}'
    back = serde.deserialize("/p", b'{"adminRoles":[],"allowedClusters":["c"],"futureField":1}')
    assert back == TenantInfo([], ["c"])
    assert JsonSerde().serialize({"partitions": 3}) == b'{"partitions":3}'
    with pytest.raises(MetadataSerdeError, match="/bad"):
        JsonSerde().deserialize("/bad", b"{not json")
    assert BytesSerde().deserialize("/x", b"\x00") == b"\x00"


async def test_read_through_hits_negative_entries_and_invalidation_by_others() -> None:
    server = MemoryMetadataServer()
    writer = server.session()
    store = CountingStore(server.session())
    cache = MetadataCache(store, JsonSerde())
    assert await cache.get("/admin/partitioned-topics/t") is None
    assert await cache.get("/admin/partitioned-topics/t") is None
    assert store.gets == 1, "negative entries are cached"
    await writer.put("/admin/partitioned-topics/t", b'{"partitions":3}')
    await asyncio.sleep(0)
    assert await cache.get("/admin/partitioned-topics/t") == {"partitions": 3}
    assert await cache.get("/admin/partitioned-topics/t") == {"partitions": 3}
    assert store.gets == 2
    await writer.put("/admin/partitioned-topics/t", b'{"partitions":4}')
    await asyncio.sleep(0)
    assert (await cache.get_with_stat("/admin/partitioned-topics/t")).stat.version == 1
    await writer.delete("/admin/partitioned-topics/t")
    await asyncio.sleep(0)
    assert await cache.get("/admin/partitioned-topics/t") is None
    assert cache.statistics()["hits"] == 2
    await cache.aclose()


async def test_concurrent_misses_share_one_read_and_stale_fill_is_dropped() -> None:
    server = MemoryMetadataServer()
    store = CountingStore(server.session())
    await store.put("/p", b"1")
    cache = MetadataCache(store, JsonSerde())
    results = await asyncio.gather(*(cache.get("/p") for _ in range(10)))
    assert results == [1] * 10 and store.gets == 1
    cache.invalidate("/p")
    pending = asyncio.create_task(cache.get("/p"))
    await asyncio.sleep(0)  # the read is in flight
    cache.invalidate("/p")  # ... and gets invalidated: what it read must not be cached
    assert await pending == 1
    assert cache.statistics()["entries"] == 0


async def test_size_bound_evicts_least_recently_used() -> None:
    store = MemoryMetadataServer().session()
    cache = MetadataCache(store, BytesSerde(), max_entries=3)
    for i in range(5):
        await store.put(f"/k{i}", str(i).encode())
    await asyncio.sleep(0)  # let the CREATED notifications pass
    for i in range(5):
        await cache.get(f"/k{i}")
    await cache.get("/k2")
    await cache.get("/k5")  # negative entry, evicts /k3
    stats = cache.statistics()
    assert stats["entries"] == 3 and stats["evictions"] == 3
    assert "/k2" in cache._entries and "/k3" not in cache._entries


async def test_read_modify_update_and_create() -> None:
    server = MemoryMetadataServer()
    a, b = server.session(), server.session()
    ca, cb = (
        MetadataCache(a, DataclassJsonSerde(TenantInfo)),
        MetadataCache(b, DataclassJsonSerde(TenantInfo)),
    )
    with pytest.raises(NotFound):
        await ca.read_modify_update("/admin/policies/t", lambda t: t)
    await ca.read_modify_update_or_create("/admin/policies/t", lambda t: t or TenantInfo([], ["c1"]))

    def add_role(role: str):
        def modify(t: TenantInfo) -> TenantInfo:
            t.admin_roles.append(role)  # mutating the copy we are given is fine
            return t

        return modify

    await asyncio.gather(
        *(c.read_modify_update("/admin/policies/t", add_role(f"r{i}")) for i, c in enumerate([ca, cb] * 5))
    )
    await asyncio.sleep(0)
    final = await cb.get("/admin/policies/t")
    assert sorted(final.admin_roles) == sorted(f"r{i}" for i in range(10))

    await b.put("/admin/policies/t", b'{"adminRoles":[],"allowedClusters":[]}')
    await asyncio.sleep(0)
    assert (await ca.get("/admin/policies/t")).admin_roles == []
    with pytest.raises(BadVersion):
        await ca.create("/admin/policies/t", TenantInfo([], []))


async def test_session_loss_clears_the_cache() -> None:
    server = MemoryMetadataServer()
    s = server.session()
    await s.put("/x", b"1")
    cache = MetadataCache(s, JsonSerde())
    await cache.get("/x")
    server.expire_session(s.session_id)
    await asyncio.sleep(0)
    assert cache.statistics()["entries"] == 0
