"""RocksDB backend specifics: persistence across reopen, ephemerals dropped, record codec."""

from __future__ import annotations

import pytest

from magnetar.metadata.api import MetadataStoreClosed
from magnetar.metadata.factory import create_metadata_store
from magnetar.metadata.local import NodeRecord
from magnetar.metadata.rocksdb import RocksdbMetadataServer, decode_record, encode_record
from magnetar.runtime import RealClock


def test_record_codec_roundtrip() -> None:
    for rec in (
        NodeRecord(b"", 0, 1, 2),
        NodeRecord(b"\x00value\xff", 7, 10, 20, "owner-1", 42),
    ):
        assert decode_record(encode_record(rec)) == rec


async def test_reopen_keeps_persistent_and_drops_ephemeral_nodes(tmp_path) -> None:
    clock = RealClock()
    url = f"rocksdb:{tmp_path}/db"
    s = await create_metadata_store(url, clock=clock)
    await s.put("/admin/policies/public", b'{"a":1}')
    await s.put("/admin/policies/public/default", b"{}")
    await s.put("/loadbalance/brokers/b1", b"me", ephemeral=True)
    seq = await s.put("/ids/id-", b"", sequential=True)
    await s.put("/cas", b"0")
    await s.put("/cas", b"1", 0)
    # Simulate a crash: the database closes without the session removing its ephemerals.
    server: RocksdbMetadataServer = s._server  # type: ignore[attr-defined]
    server._closing = server._closed = True
    await server._executor.run(server._db.close)
    await server._executor.aclose()

    s2 = await create_metadata_store(url, clock=clock)
    assert (await s2.get("/admin/policies/public")).value == b'{"a":1}'
    assert await s2.children("/admin/policies/public") == ["default"]
    assert await s2.exists("/loadbalance/brokers/b1") is None
    assert await s2.children("/loadbalance/brokers") == []
    got = await s2.get("/cas")
    assert got.value == b"1" and got.stat.version == 1
    seq2 = await s2.put("/ids/id-", b"", sequential=True)
    assert seq2.path > seq.path, "sequence counters persist"
    await s2.aclose()
    with pytest.raises(MetadataStoreClosed):
        await s2.get("/cas")


async def test_closing_the_owning_session_closes_the_database_and_releases_the_lock(tmp_path) -> None:
    clock = RealClock()
    s = await create_metadata_store(f"rocksdb:{tmp_path}/db", clock=clock)
    await s.put("/x", b"1")
    await s.aclose()
    s2 = await create_metadata_store(f"rocksdb:{tmp_path}/db", clock=clock)  # would fail on LOCK
    assert (await s2.get("/x")).value == b"1"
    await s2.aclose()


async def test_sessions_share_one_database(tmp_path) -> None:
    server = await RocksdbMetadataServer.open(str(tmp_path / "db"), clock=RealClock())
    a, b = server.session(), server.session()
    await a.put("/e", b"", ephemeral=True)
    assert (await b.get("/e")).stat.ephemeral_owner == a.session_id
    await a.aclose()
    assert await b.exists("/e") is None
    await server.aclose()
    await b.aclose()  # already closed by the server: idempotent


async def test_group_commit_shares_fsyncs_and_keeps_cas_exact(tmp_path) -> None:
    import asyncio

    from magnetar.metadata.api import AlreadyExists

    server = await RocksdbMetadataServer.open(str(tmp_path / "db"), clock=RealClock())
    s = server.session()
    await s.put("/warm", b"")
    before = server.statistics()["synced_writes"]
    await asyncio.gather(*(s.put(f"/g/n{i}", b"x") for i in range(200)))
    used = server.statistics()["synced_writes"] - before
    assert used < 200, f"{used} synced writes for 200 concurrent puts: no grouping"
    assert await s.children("/g") == sorted(f"n{i}" for i in range(200))

    # Within one group, later operations see earlier ones: exactly one create wins.
    outcomes = await asyncio.gather(*(s.put("/once", b"", -1) for _ in range(20)), return_exceptions=True)
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    assert all(isinstance(o, AlreadyExists) for o in outcomes if isinstance(o, BaseException))
    # A create and a recursive delete in the same group.
    await asyncio.gather(s.put("/tmp/a/b", b""), s.delete_recursive("/tmp"), s.put("/tmp/c", b""))
    assert await s.children("/tmp") == ["c"]
    await server.aclose()


async def test_opening_a_database_in_use_is_a_clear_error(tmp_path) -> None:
    from magnetar.metadata.api import MetadataError

    server = await RocksdbMetadataServer.open(str(tmp_path / "db"), clock=RealClock())
    with pytest.raises(MetadataError, match="cannot open metadata database .*lock"):
        await RocksdbMetadataServer.open(str(tmp_path / "db"), clock=RealClock())
    await server.aclose()
