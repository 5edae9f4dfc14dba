"""The TCP bookie client's task-free add (``WireBookieClient.add_entry_nowait``), issue 15.

A bookie in another process (cluster brokers today, any "second core" design
tomorrow) is reached through this client; its add path was a task, a
semaphore coroutine and a timer per add, which cost more broker CPU than the
whole in-process bookie.  These tests hold the nowait path to the contract of
``add_entry``: same bytes stored, the same typed errors (as the future's
exception), a dead connection fails every add in flight, no task per add
through the ledger handle, and the cases where it must decline (None) do.
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.bookie.api import (
    BookieUnavailableError,
    LedgerFencedError,
    UnauthorizedAccessError,
)
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.server import BookieServer
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookie.wire_client import WireBookieClient, WireBookieClientPool
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.fake_bookie import FakeBookiePool

KEY = b"core15"


def entry(lid: int, eid: int, payload: bytes | None = None) -> bytes:
    return encode_entry(lid, eid, eid - 1, 0, payload or f"{lid}/{eid}".encode() * 9)


@pytest.fixture
async def bookie(tmp_path):  # type: ignore[no-untyped-def]
    """A real bookie storage behind a real TCP server; yields its port."""
    cfg = BookieConfig.for_data_dir(str(tmp_path), journal_max_group_wait_ms=0)
    storage = LedgerStorage(cfg, bookie_id="127.0.0.1:0")
    await storage.open()
    server = BookieServer(LocalBookieClient(storage, timeout_ms=5000), "127.0.0.1", 0)
    port = await server.start()
    storage.bookie_id = f"127.0.0.1:{port}"
    yield port
    await server.aclose()
    await storage.aclose()


async def test_nowait_adds_store_the_same_bytes_and_decline_until_connected(bookie) -> None:  # type: ignore[no-untyped-def]
    c = WireBookieClient("b", "127.0.0.1", bookie, timeout_ms=5000)
    try:
        assert c.add_entry_nowait(1, 0, KEY, entry(1, 0)) is None  # not connected: the coroutine path
        await c.add_entry(1, 0, KEY, entry(1, 0))
        futs = [c.add_entry_nowait(1, i, KEY, entry(1, i)) for i in range(1, 301)]
        assert all(f is not None for f in futs)
        assert await asyncio.gather(*futs) == [None] * 300  # type: ignore[arg-type]
        for i in (0, 1, 150, 300):
            assert await c.read_entry(1, i) == entry(1, i)
    finally:
        await c.aclose()


async def test_nowait_errors_are_the_typed_errors_of_add_entry(bookie) -> None:  # type: ignore[no-untyped-def]
    c = WireBookieClient("b", "127.0.0.1", bookie, timeout_ms=5000)
    try:
        for i in range(2):
            await c.add_entry(2, i, KEY, entry(2, i))
        wrong_key = c.add_entry_nowait(2, 2, b"wrong", entry(2, 2))
        assert wrong_key is not None
        with pytest.raises(UnauthorizedAccessError):
            await wrong_key
        await c.read_entry(2, 1, fence=True, master_key=KEY)
        fenced = c.add_entry_nowait(2, 2, KEY, entry(2, 2))
        assert fenced is not None
        with pytest.raises(LedgerFencedError):
            await fenced
        recovery = c.add_entry_nowait(2, 2, KEY, entry(2, 2), recovery=True)
        assert recovery is not None
        await recovery
        assert await c.read_entry(2, 2) == entry(2, 2)
    finally:
        await c.aclose()


async def test_a_lost_connection_fails_the_adds_in_flight_and_frees_their_slots() -> None:
    """A bookie that reads the adds and never answers, then drops the connection."""
    got_data = asyncio.Event()
    peers: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer)
        while await reader.read(65536):
            got_data.set()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    c = WireBookieClient("silent", "127.0.0.1", port, timeout_ms=5000, max_in_flight=2)
    try:
        await c._connection()
        first = c.add_entry_nowait(3, 0, KEY, entry(3, 0))
        second = c.add_entry_nowait(3, 1, KEY, entry(3, 1))
        assert first is not None and second is not None
        assert c.add_entry_nowait(3, 2, KEY, entry(3, 2)) is None  # both slots taken: must decline
        await asyncio.wait_for(got_data.wait(), 20)
        assert not first.done()
        peers[0].close()  # the bookie goes away with two adds unanswered
        for fut in (first, second):
            with pytest.raises(BookieUnavailableError):
                await asyncio.wait_for(fut, 20)
        assert c._slots._value == 2  # the slots came back
    finally:
        await c.aclose()
        server.close()
        await server.wait_closed()


async def test_the_ledger_handle_adds_over_the_wire_without_a_task_each(bookie) -> None:  # type: ignore[no-untyped-def]
    clock = RealClock()
    bookie_id = f"127.0.0.1:{bookie}"
    meta = MemoryMetadataServer(clock=clock)
    await FakeBookiePool().register(meta.session(), only=[bookie_id])
    pool = WireBookieClientPool(timeout_ms=5000)
    bk = BookKeeperClient(meta.session(), pool, clock, Rng(1), ClientConfig())
    try:
        wh = await bk.create_ledger(1, 1, 1, password=b"pw")
        await wh.add_entry(b"first")  # connects the client (the coroutine path)
        before = len(asyncio.all_tasks())
        datas = [b"%d" % i * 40 for i in range(300)]
        futs = [wh.add_entry_nowait(d) for d in datas]
        assert len(asyncio.all_tasks()) == before  # no task per add
        assert await asyncio.gather(*futs) == list(range(1, 301))
        assert [e.data for e in await wh.read(1, 300)] == datas
        await wh.close()
    finally:
        await bk.aclose()
        await pool.aclose()


async def test_adds_may_reach_the_bookie_out_of_entry_order(bookie) -> None:  # type: ignore[no-untyped-def]
    """A nowait add can overtake one still on the coroutine path (connecting, waiting for a slot
    or a drain): the bookie must take entries of a ledger in any order, as BookKeeper's does."""
    c = WireBookieClient("b", "127.0.0.1", bookie, timeout_ms=5000)
    try:
        await c.add_entry(7, 0, KEY, entry(7, 0))
        late = asyncio.ensure_future(c.add_entry(7, 1, KEY, entry(7, 1)))  # the coroutine path
        ahead = [c.add_entry_nowait(7, i, KEY, entry(7, i)) for i in (3, 2)]
        assert all(f is not None for f in ahead)
        await asyncio.gather(late, *ahead)  # type: ignore[arg-type]
        for i in range(4):
            assert await c.read_entry(7, i) == entry(7, i)
    finally:
        await c.aclose()
