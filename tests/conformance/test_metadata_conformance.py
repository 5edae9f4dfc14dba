"""The metadata-store conformance suite on every backend (memory, RocksDB, ZooKeeper)."""

from __future__ import annotations

import pytest

from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.testing.metadata_conformance import CHECKS, MetadataStoreFactory, run_check
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 - fixture


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


@pytest.fixture
async def zk_factory(zookeeper_server):
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock
    from magnetar.testing.zookeeper import expire_session

    stores = []

    async def new_store():
        s = await create_metadata_store(
            f"{zookeeper_server.url}/conformance-chroot", clock=RealClock(), session_timeout_ms=4_000
        )
        stores.append(s)
        return s

    yield MetadataStoreFactory(new_store, expire_session, name="zookeeper")
    for s in stores:
        await s.aclose()


@pytest.mark.zookeeper
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_zookeeper(zk_factory, check) -> None:
    await run_check(zk_factory, check)
