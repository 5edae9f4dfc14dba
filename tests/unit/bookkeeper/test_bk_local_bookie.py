"""The ledger client over the real bookie storage in-process (standalone's E=Qw=Qa=1 path)."""

from __future__ import annotations

import pytest

from magnetar.bookie.config import BookieConfig
from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookkeeper import api
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.fake_bookie import FakeBookiePool


async def test_write_close_recover_and_read_on_a_real_local_bookie(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = RealClock()
    cfg = BookieConfig.for_data_dir(str(tmp_path / "bookie"), journal_max_group_wait_ms=1)
    storage = LedgerStorage(cfg, clock=clock, bookie_id="127.0.0.1:3181")
    await storage.open()
    pool = LocalBookieClientPool(LocalBookieClient(storage, timeout_ms=5_000))
    server = MemoryMetadataServer(clock=clock)
    await FakeBookiePool().register(server.session(), only=["127.0.0.1:3181"])
    config = ClientConfig(add_timeout_ms=5_000, read_timeout_ms=5_000)
    writer = BookKeeperClient(server.session(), pool, clock, Rng(1), config)
    other = BookKeeperClient(server.session(), pool, clock, Rng(2), config)
    try:
        wh = await writer.create_ledger(1, 1, 1, password=b"pw")
        datas = [bytes([i % 256]) * (i + 1) for i in range(200)]
        for d in datas:
            await wh.add_entry(d)
        await wh.close()
        rh = await other.open_ledger(wh.ledger_id, password=b"pw", recovery=False)
        assert [e.data for e in await rh.read(0, 199)] == datas

        # an open ledger recovered by another client: the writer is fenced by the real bookie
        wh2 = await writer.create_ledger(1, 1, 1, password=b"pw")
        for d in datas[:50]:
            await wh2.add_entry(d)
        rh2 = await other.open_ledger(wh2.ledger_id, password=b"pw")
        assert rh2.metadata.is_closed and rh2.metadata.last_entry_id == 49
        with pytest.raises(api.LedgerFencedError):
            await wh2.add_entry(b"late")
        assert [e.data for e in await rh2.read(0, 49)] == datas[:50]
        # recovering a ledger the bookie never saw: fencing creates it, so a late writer is refused too
        wh3 = await writer.create_ledger(1, 1, 1, password=b"pw")
        rh3 = await other.open_ledger(wh3.ledger_id, password=b"pw")
        assert rh3.metadata.last_entry_id == -1
        with pytest.raises(api.LedgerFencedError):
            await wh3.add_entry(b"late")
    finally:
        await writer.aclose()
        await other.aclose()
        await pool.aclose()
        await storage.aclose()
