"""Schema storage on real metadata stores: layout, round trips, CAS races, limits, durability."""

from __future__ import annotations

import asyncio
import json

import pytest

from magnetar.broker.schema import (
    InvalidSchemaError,
    SchemaInfo,
    SchemaRegistry,
    SchemaRegistryConfig,
    SchemaTooLargeError,
    SchemaType,
    schema_id,
    storage,
)
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S
from magnetar.metadata import api as md
from magnetar.metadata.factory import create_metadata_store
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.testing.clock import ManualClock

T = "persistent://public/default/orders"


def avro_def(*names: str) -> SchemaInfo:
    fields = [{"name": n, "type": ["null", "string"], "default": None} for n in names]
    data = json.dumps({"type": "record", "name": "R", "fields": fields}).encode()
    return SchemaInfo("orders", SchemaType.AVRO, data, {"owner": "team-a"})


def test_schema_id_is_the_base_topic_without_domain() -> None:
    assert schema_id(T) == "public/default/orders"
    assert schema_id("persistent://public/default/orders-partition-7") == "public/default/orders"
    assert schema_id("non-persistent://public/default/orders") == "public/default/orders"
    assert schema_id("orders") == "public/default/orders"
    assert schema_id("persistent://t/ns/a b") == "t/ns/a+b"


async def test_layout_and_round_trip(server: MemoryMetadataServer, registry: SchemaRegistry, clock) -> None:  # type: ignore[no-untyped-def]
    v0 = await registry.put_schema_if_compatible(T, avro_def("a"), S.FULL)
    await clock.advance(5)
    v1 = await registry.put_schema_if_compatible(f"{T}-partition-2", avro_def("a", "b"), S.FULL)
    assert (v0, v1) == (b"\x00" * 8, b"\x00" * 7 + b"\x01")
    paths = [p for p in server.paths() if p.startswith("/schemas")]
    assert paths[:4] == [
        "/schemas",
        "/schemas/public",
        "/schemas/public/default",
        "/schemas/public/default/orders",
    ]
    data_nodes = paths[4:]
    assert len(data_nodes) == 2 and all(p.startswith("/schemas/public/default/orders/v-") for p in data_nodes)
    store = server.session()
    locator = json.loads((await store.get("/schemas/public/default/orders")).value)
    assert [e[0] for e in locator["versions"]] == [0, 1]

    recs = await registry.get_all("public/default/orders-partition-0")
    assert [r.version for r in recs] == [0, 1]
    assert recs[1].info == avro_def("a", "b")
    assert recs[1].timestamp_ms - recs[0].timestamp_ms == 5000
    # A fresh registry (another broker, or after a restart) reads the same history.
    other = SchemaRegistry(server.session(), clock)
    assert (await other.get_schema(T)).info == avro_def("a", "b")
    assert (await other.get_schema(T, 0)).info == avro_def("a")


async def test_delete_removes_every_node(server: MemoryMetadataServer, registry: SchemaRegistry) -> None:
    await registry.put_schema_if_compatible(T, avro_def("a"), S.FULL)
    await registry.put_schema_if_compatible(T, avro_def("a", "b"), S.FULL)
    await registry.put_schema_if_compatible("persistent://public/default/other", avro_def("x"), S.FULL)
    await registry.delete(T)
    assert not [p for p in server.paths() if p.startswith("/schemas/public/default/orders")]
    assert await registry.get_all(T) == []
    assert await registry.has_schema("persistent://public/default/other")
    await registry.delete(T)  # idempotent
    # A new history starts at version 0 again.
    assert await registry.put_schema_if_compatible(T, avro_def("z"), S.FULL) == b"\x00" * 8


async def test_oversized_schema_is_refused_and_nothing_is_written(
    server: MemoryMetadataServer, clock
) -> None:  # type: ignore[no-untyped-def]
    registry = SchemaRegistry(server.session(), clock, SchemaRegistryConfig(schema_bytes_max=1024))
    big = avro_def(*[f"field_{i:04d}" for i in range(100)])
    assert len(big.schema_data) > 1024
    with pytest.raises(SchemaTooLargeError, match=r"over the limit of 1024 bytes") as exc:
        await registry.put_schema_if_compatible(T, big, S.FULL)
    assert exc.value.http_status == 422
    assert not [p for p in server.paths() if p.startswith("/schemas")]
    # Under the default limit (256 KiB) the same schema is fine.
    assert await SchemaRegistry(server.session(), clock).put_schema_if_compatible(T, big, S.FULL)


def test_config_limits() -> None:
    with pytest.raises(ValueError):
        SchemaRegistryConfig(schema_bytes_max=2 * 1024 * 1024)
    with pytest.raises(ValueError):
        SchemaRegistryConfig(schema_versions_max=0)


async def test_version_count_limit(server: MemoryMetadataServer, clock) -> None:  # type: ignore[no-untyped-def]
    registry = SchemaRegistry(server.session(), clock, SchemaRegistryConfig(schema_versions_max=2))
    await registry.put_schema_if_compatible(T, avro_def("a"), S.FULL)
    await registry.put_schema_if_compatible(T, avro_def("a", "b"), S.FULL)
    with pytest.raises(InvalidSchemaError, match="already has 2 schema versions"):
        await registry.put_schema_if_compatible(T, avro_def("a", "b", "c"), S.FULL)
    assert (
        await registry.put_schema_if_compatible(T, avro_def("a"), S.FULL) == b"\x00" * 8
    )  # reuse still works


class YieldingStore:
    """Wraps a store so every operation yields to the loop first: concurrent registries interleave."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self._inner = inner

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        attr = getattr(self._inner, name)
        if name not in {"get", "put", "delete", "delete_recursive", "children", "exists"}:
            return attr

        async def op(*args, **kwargs):  # type: ignore[no-untyped-def]
            await asyncio.sleep(0)
            return await attr(*args, **kwargs)

        return op


async def test_concurrent_registrations_get_distinct_versions(
    server: MemoryMetadataServer, clock, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    lost = []
    append = storage.SchemaStorage.append

    async def counting_append(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return await append(self, *args, **kwargs)
        except md.BadVersion:
            lost.append(1)
            raise

    monkeypatch.setattr(storage.SchemaStorage, "append", counting_append)
    brokers = [SchemaRegistry(YieldingStore(server.session()), clock) for _ in range(4)]
    schemas = [avro_def("a", *[f"f{j}" for j in range(i + 1)]) for i in range(4)]
    versions = await asyncio.gather(
        *(
            b.put_schema_if_compatible(T, s, S.ALWAYS_COMPATIBLE)
            for b, s in zip(brokers, schemas, strict=True)
        )
    )
    assert sorted(versions) == [bytes(7) + bytes([i]) for i in range(4)]
    recs = await brokers[0].get_all(T)
    by_version = {r.version: r.info for r in recs}
    for v, s in zip(versions, schemas, strict=True):
        assert by_version[int.from_bytes(v, "big")] == s
    # Losers of the CAS removed their data nodes: one data node per version.
    assert len([p for p in server.paths() if "/orders/v-" in p]) == 4
    assert lost, "the registries raced on the locator CAS"


async def test_concurrent_identical_registrations_share_one_version(
    server: MemoryMetadataServer, clock
) -> None:  # type: ignore[no-untyped-def]
    brokers = [SchemaRegistry(YieldingStore(server.session()), clock) for _ in range(3)]
    versions = await asyncio.gather(*(b.put_schema_if_compatible(T, avro_def("a"), S.FULL) for b in brokers))
    assert versions == [b"\x00" * 8] * 3
    assert len(await brokers[0].get_all(T)) == 1


async def test_corrupt_data_node_is_a_clear_error(
    server: MemoryMetadataServer, registry: SchemaRegistry
) -> None:
    await registry.put_schema_if_compatible(T, avro_def("a"), S.FULL)
    store = server.session()
    node = next(p for p in server.paths() if "/orders/v-" in p)
    await store.put(node, b"garbage")
    fresh = SchemaRegistry(server.session(), ManualClock())
    with pytest.raises(InvalidSchemaError, match="Corrupt schema version 0"):
        await fresh.get_schema(T)
    await store.put("/schemas/public/default/orders", b"{")
    with pytest.raises(InvalidSchemaError, match="Corrupt schema locator"):
        await fresh.get_schema(T)


async def test_durable_on_rocksdb_across_reopen(tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    url = f"rocksdb:{tmp_path}/meta"
    store = await create_metadata_store(url, clock=clock)
    reg = SchemaRegistry(store, clock)
    await reg.put_schema_if_compatible(T, avro_def("a"), S.FULL)
    await reg.put_schema_if_compatible(T, avro_def("a", "b"), S.FULL)
    await store.aclose()
    store2 = await create_metadata_store(url, clock=clock)
    try:
        reg2 = SchemaRegistry(store2, clock)
        assert [r.info for r in await reg2.get_all(T)] == [avro_def("a"), avro_def("a", "b")]
        assert await reg2.put_schema_if_compatible(T, avro_def("a"), S.FULL) == b"\x00" * 8
        assert await reg2.put_schema_if_compatible(T, avro_def("a", "b", "c"), S.FULL) == bytes(7) + b"\x02"
    finally:
        await store2.aclose()


class DeleteBeforeCommitStore(YieldingStore):
    """Deletes the whole history once, just before the first locator commit (a topic delete racing)."""

    def __init__(self, inner, victim: str) -> None:  # type: ignore[no-untyped-def]
        super().__init__(inner)
        self._victim = victim
        self.fired = False

    async def put(self, path, value, expected_version=None, **kwargs):  # type: ignore[no-untyped-def]
        if path == self._victim and value and not self.fired:
            self.fired = True
            await self._inner.delete_recursive(path)
        return await self._inner.put(path, value, expected_version, **kwargs)


async def test_history_deleted_during_a_registration(server: MemoryMetadataServer, clock) -> None:  # type: ignore[no-untyped-def]
    store = DeleteBeforeCommitStore(server.session(), "/schemas/public/default/orders")
    registry = SchemaRegistry(store, clock)
    assert await registry.put_schema_if_compatible(T, avro_def("a"), S.FULL) == bytes(8)
    assert store.fired
    assert [r.info for r in await registry.get_all(T)] == [avro_def("a")]
    assert len([p for p in server.paths() if "/orders/v-" in p]) == 1


async def test_cached_locator_and_data_never_go_stale(server: MemoryMetadataServer, clock) -> None:  # type: ignore[no-untyped-def]
    a = SchemaRegistry(server.session(), clock)
    b = SchemaRegistry(server.session(), clock)
    await a.put_schema_if_compatible(T, avro_def("a"), S.FULL)
    assert (await a.get_schema(T)).version == 0  # a caches locator and data
    await b.put_schema_if_compatible(T, avro_def("a", "b"), S.FULL)
    assert (await a.get_schema(T)).info == avro_def("a", "b")
    await b.delete(T)  # hard delete, then a new history reusing node names
    await b.put_schema_if_compatible(T, avro_def("x"), S.FULL)
    got = await a.get_schema(T)
    assert (got.version, got.info) == (0, avro_def("x"))
    await b.delete_schema(T)
    assert not await a.has_schema(T)
