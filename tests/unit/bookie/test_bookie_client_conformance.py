"""The BookieClient contract, run against both implementations: in-process and TCP.

Both must return the same bytes and raise the same typed errors, so the ledger
client behaves identically in standalone and in a cluster.
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.bookie.api import (
    LAST_ENTRY,
    BadRequestError,
    BookieClient,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedAccessError,
)
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.server import BookieServer
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookie.wire_client import WireBookieClient

KEY = b"conformance"


def entry(lid: int, eid: int, lac: int | None = None, payload: bytes | None = None) -> bytes:
    return encode_entry(lid, eid, eid - 1 if lac is None else lac, 0, payload or f"{lid}/{eid}".encode() * 7)


@pytest.fixture(params=["local", "wire"])
async def client(request, tmp_path):
    cfg = BookieConfig.for_data_dir(str(tmp_path), journal_max_group_wait_ms=0)
    storage = LedgerStorage(cfg, bookie_id="bk-conf")
    await storage.open()
    local = LocalBookieClient(storage, timeout_ms=5000)
    server = None
    c: BookieClient = local
    if request.param == "wire":
        server = BookieServer(local, "127.0.0.1", 0)
        port = await server.start()
        c = WireBookieClient("bk-conf", "127.0.0.1", port, timeout_ms=5000)
    yield c
    await c.aclose()
    if server is not None:
        await server.aclose()
    await storage.aclose()


async def test_is_a_bookie_client(client):
    assert isinstance(client, BookieClient)
    assert client.bookie_id == "bk-conf"


async def test_bytes_round_trip_exactly(client):
    payloads = [b"", b"\x00" * 1000, bytes(range(256)) * 40]
    for i, p in enumerate(payloads):
        await client.add_entry(1, i, KEY, entry(1, i, payload=p or b"x"))
    for i, p in enumerate(payloads):
        assert await client.read_entry(1, i) == entry(1, i, payload=p or b"x")
    assert await client.read_entry(1, LAST_ENTRY) == entry(1, 2, payload=payloads[2])


async def test_missing_ledger_and_entry(client):
    with pytest.raises(NoSuchLedgerError):
        await client.read_entry(404, 0)
    with pytest.raises(NoSuchLedgerError):
        await client.read_entry(404, LAST_ENTRY)
    await client.add_entry(2, 0, KEY, entry(2, 0))
    with pytest.raises(NoSuchEntryError):
        await client.read_entry(2, 1)
    assert await client.read_lac(404) == -1


async def test_bad_entries_are_bad_requests(client):
    with pytest.raises(BadRequestError):
        await client.add_entry(3, 0, KEY, b"not a framed entry")
    with pytest.raises(BadRequestError):
        await client.add_entry(3, 5, KEY, entry(3, 4))


async def test_master_key_is_enforced(client):
    await client.add_entry(4, 0, KEY, entry(4, 0))
    with pytest.raises(UnauthorizedAccessError):
        await client.add_entry(4, 1, b"wrong", entry(4, 1))
    with pytest.raises(UnauthorizedAccessError):
        await client.read_entry(4, 0, fence=True, master_key=b"wrong")


async def test_fencing_and_recovery_adds(client):
    for i in range(3):
        await client.add_entry(5, i, KEY, entry(5, i))
    assert await client.read_entry(5, LAST_ENTRY, fence=True, master_key=KEY) == entry(5, 2)
    with pytest.raises(LedgerFencedError):
        await client.add_entry(5, 3, KEY, entry(5, 3))
    await client.add_entry(5, 3, KEY, entry(5, 3), recovery=True)
    assert await client.read_entry(5, 3) == entry(5, 3)
    # fencing is idempotent
    assert await client.read_entry(5, 0, fence=True, master_key=KEY) == entry(5, 0)


async def test_lac_tracking_and_long_poll(client):
    assert await client.read_lac(6) == -1
    await client.add_entry(6, 0, KEY, entry(6, 0, lac=-1))
    await client.add_entry(6, 1, KEY, entry(6, 1, lac=0))
    assert await client.read_lac(6) == 0
    assert await client.wait_lac(6, 0, 20) == 0  # nothing new: returns at the timeout
    waiter = asyncio.ensure_future(client.wait_lac(6, 0, 5000))
    await asyncio.sleep(0.02)
    assert not waiter.done()
    await client.add_entry(6, 2, KEY, entry(6, 2, lac=1))
    assert await asyncio.wait_for(waiter, 3) == 1


async def test_get_info(client):
    info = await client.get_info()
    assert info.bookie_id == "bk-conf"
    assert info.total_disk_bytes >= info.free_disk_bytes > 0
    assert info.read_only is False
