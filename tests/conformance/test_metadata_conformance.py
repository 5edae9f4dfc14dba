"""The metadata-store conformance suite on every backend (memory, RocksDB, ZooKeeper)."""

from __future__ import annotations

import pytest

from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.testing.metadata_conformance import CHECKS, MetadataStoreFactory, run_check


def memory_factory() -> MetadataStoreFactory:
    server = MemoryMetadataServer(name="conf")

    async def new_store():
        return server.session()

    async def expire(store):
        server.expire_session(store.session_id)

    return MetadataStoreFactory(new_store, expire, name="memory")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_memory(check) -> None:
    await run_check(memory_factory(), check)


@pytest.fixture
async def rocksdb_factory(tmp_path):
    from magnetar.metadata.rocksdb import RocksdbMetadataServer
    from magnetar.runtime import RealClock

    server = await RocksdbMetadataServer.open(str(tmp_path / "meta"), clock=RealClock())

    async def new_store():
        return server.session()

    async def expire(store):
        server.expire_session(store.session_id)

    yield MetadataStoreFactory(new_store, expire, name="rocksdb")
    await server.aclose()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_rocksdb(rocksdb_factory, check) -> None:
    await run_check(rocksdb_factory, check)
