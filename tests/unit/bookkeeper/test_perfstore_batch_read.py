"""Batch reads: a range goes to the bookie in one call, verified, with a per-entry fallback."""

from __future__ import annotations

import pytest

from magnetar.bookie.api import BookieUnavailableError, NoSuchEntryError
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.fake_bookie import FakeBookiePool

BOOKIE = "127.0.0.1:3181"


class CountingClient(LocalBookieClient):
    """The local client, counting calls; ``batch_fault`` changes what batch reads return."""

    def __init__(self, storage: LedgerStorage) -> None:
        super().__init__(storage, timeout_ms=5_000)
        self.batch_calls: list[tuple[int, int]] = []
        self.single_calls: list[int] = []
        self.batch_fault: str | None = None  # "corrupt-3" | "fail"

    async def read_entries(self, ledger_id: int, first: int, last: int, max_bytes: int = 0) -> list[bytes]:
        self.batch_calls.append((first, last))
        if self.batch_fault == "fail":
            raise BookieUnavailableError("batch read refused", self.bookie_id)
        got = await super().read_entries(ledger_id, first, last, max_bytes)
        if self.batch_fault == "corrupt-3" and first <= 3 < first + len(got):
            bad = bytearray(got[3 - first])  # entry 3's batch copy is always bad
            bad[-1] ^= 0xFF
            got[3 - first] = bytes(bad)
        return got

    async def read_entry(self, ledger_id: int, entry_id: int, **kw: object) -> bytes:
        self.single_calls.append(entry_id)
        return await super().read_entry(ledger_id, entry_id, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def setup(tmp_path):
    clock = RealClock()
    cfg = BookieConfig.for_data_dir(str(tmp_path / "bookie"), journal_sync_data=False)
    storage = LedgerStorage(cfg, clock=clock, bookie_id=BOOKIE)
    await storage.open()
    client = CountingClient(storage)
    pool = LocalBookieClientPool(client)
    server = MemoryMetadataServer(clock=clock)
    await FakeBookiePool().register(server.session(), only=[BOOKIE])
    bk = BookKeeperClient(
        server.session(), pool, clock, Rng(1), ClientConfig(add_timeout_ms=5_000, read_timeout_ms=5_000)
    )
    yield storage, client, bk
    await bk.aclose()
    await pool.aclose()
    await storage.aclose()


async def _ledger(bk: BookKeeperClient, n: int) -> tuple[int, list[bytes]]:
    wh = await bk.create_ledger(1, 1, 1, password=b"pw")
    datas = [b"entry-%05d" % i for i in range(n)]
    for d in datas:
        await wh.add_entry(d)
    await wh.close()
    return wh.ledger_id, datas


async def test_a_range_is_one_batch_call_per_thousand_entries(setup) -> None:
    storage, client, bk = setup
    lid, datas = await _ledger(bk, 1500)
    rh = await bk.open_ledger(lid, password=b"pw", recovery=False)
    client.batch_calls.clear()
    client.single_calls.clear()
    got = await rh.read(0, 1499)
    assert [e.data for e in got] == datas
    assert [e.entry_id for e in got] == list(range(1500))
    assert client.batch_calls == [(0, 999), (1000, 1499)]
    assert client.single_calls == []


async def test_a_bad_digest_in_a_batch_falls_back_to_single_reads(setup) -> None:
    storage, client, bk = setup
    lid, datas = await _ledger(bk, 20)
    rh = await bk.open_ledger(lid, password=b"pw", recovery=False)
    client.batch_calls.clear()
    client.single_calls.clear()
    client.batch_fault = "corrupt-3"
    got = await rh.read(0, 19)
    assert [e.data for e in got] == datas  # the corrupted copy was never returned
    assert client.batch_calls[:2] == [(0, 19), (3, 19)]
    assert client.single_calls[0] == 3  # entry 3 was read again on its own, and verified


async def test_a_failed_batch_read_falls_back_to_single_reads(setup) -> None:
    storage, client, bk = setup
    lid, datas = await _ledger(bk, 10)
    rh = await bk.open_ledger(lid, password=b"pw", recovery=False)
    client.single_calls.clear()
    client.batch_fault = "fail"
    assert [e.data for e in await rh.read(0, 9)] == datas
    assert sorted(client.single_calls) == list(range(10))


async def test_storage_batch_read_prefix_missing_and_byte_limit(setup) -> None:
    storage, client, bk = setup
    lid, _ = await _ledger(bk, 10)
    whole = await storage.read_entries(lid, 0, 9)
    assert whole == [await storage.read_entry(lid, e) for e in range(10)]
    assert len(await storage.read_entries(lid, 5, 50)) == 5  # stops at the first entry it lacks
    assert len(await storage.read_entries(lid, 0, 9, max_bytes=len(whole[0]) * 3)) == 3
    assert len(await storage.read_entries(lid, 0, 9, max_bytes=1)) == 1  # at least one
    with pytest.raises(NoSuchEntryError):
        await storage.read_entries(lid, 10, 12)
    await storage.aclose()  # read after restart: entry log + index, cold caches
    cfg = storage.config
    again = LedgerStorage(cfg, clock=RealClock(), bookie_id=BOOKIE)
    await again.open()
    try:
        assert await again.read_entries(lid, 0, 9) == whole
    finally:
        await again.aclose()
