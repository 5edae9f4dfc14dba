"""Fencing with real processes: recovery by a second client stops the first writer.

Three `magnetar bookie` subprocesses and a real ZooKeeper.  Client A (its
own ZooKeeper session and TCP connections) streams pipelined adds to a
ledger (E=3 Qw=3 Qa=2).  Mid-stream, client B opens the ledger with
recovery: it fences the ledger on the bookies, recovers the tail and closes
it.  From then on A's adds fail with LedgerFencedError -- the next add after
B's open returns, at the latest -- and nothing A was told is acknowledged is
lost: every acked id is <= B's last entry and reads back with A's bytes, and
every entry up to B's last entry is exactly what A pushed for that id.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from bookie_proc import BookieProcess, free_port, start_bookie

from magnetar.bookie.api import AVAILABLE_PATH
from magnetar.bookie.wire_client import WireBookieClientPool
from magnetar.bookkeeper import api
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock, Rng
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 - fixture

pytestmark = pytest.mark.zookeeper
CONFIG = ClientConfig(add_timeout_ms=3_000, read_timeout_ms=3_000, bookie_list_refresh_ms=500)


@pytest.fixture
async def three_bookies(tmp_path, zookeeper_server):  # type: ignore[no-untyped-def]
    meta_url = f"{zookeeper_server.url}/fencing-{time.time_ns()}"
    conf = tmp_path / "bookie.conf"
    conf.write_text("journalMaxGroupWaitMSec=1\n")
    bookies: list[BookieProcess] = []
    stores = []
    try:
        for i in range(3):
            bookies.append(
                await start_bookie(str(tmp_path / f"b{i}"), free_port(), meta_url, config=str(conf))
            )

        async def client(seed: int) -> BookKeeperClient:
            store = await create_metadata_store(meta_url, clock=RealClock(), session_timeout_ms=4_000)
            stores.append(store)
            for _ in range(150):
                if len([c for c in await store.children(AVAILABLE_PATH) if c != "readonly"]) >= 3:
                    break
                await asyncio.sleep(0.2)
            return BookKeeperClient(
                store, WireBookieClientPool(timeout_ms=5_000), RealClock(), Rng(seed), CONFIG
            )

        yield client
    finally:
        for s in stores:
            await s.aclose()
        for b in bookies:
            if b.proc.returncode is None:
                assert await b.terminate() == 0


async def test_recovery_by_a_second_client_fences_the_first_writer(three_bookies) -> None:  # type: ignore[no-untyped-def]
    writer = await three_bookies(1)
    recoverer = await three_bookies(2)
    wh = await writer.create_ledger(3, 3, 2, password=b"secret")
    rng = Rng(5)
    pushed: dict[int, bytes] = {}
    acked: dict[int, bytes] = {}
    fenced_errors = 0
    recovered: asyncio.Future[api.ReadHandle] = asyncio.get_running_loop().create_future()
    enough_acked = asyncio.Event()

    async def add(data: bytes) -> None:
        nonlocal fenced_errors
        eid = wh.last_add_pushed + 1
        pushed[eid] = data
        try:
            got = await wh.add_entry(data)
        except api.LedgerFencedError:
            fenced_errors += 1
            return
        assert got == eid
        acked[eid] = data
        if len(acked) >= 150:
            enough_acked.set()

    async def recover_midway() -> None:
        await asyncio.wait_for(enough_acked.wait(), 60)
        recovered.set_result(await recoverer.open_ledger(wh.ledger_id, password=b"secret", recovery=True))

    recovering = asyncio.ensure_future(recover_midway())
    tasks = []
    i = 0
    while not recovered.done():
        tasks.append(asyncio.ensure_future(add(b"entry-%d-" % i + rng.randbytes(rng.randint(1, 500)))))
        i += 1
        if len(tasks) % 8 == 0:
            await asyncio.sleep(0.001)
        assert i < 100_000
    await recovering
    rh = recovered.result()
    after = [asyncio.ensure_future(add(b"after-%d" % k)) for k in range(5)]
    await asyncio.wait_for(asyncio.gather(*tasks, *after), 60)

    last = rh.metadata.last_entry_id
    assert rh.metadata.is_closed
    assert len(acked) >= 150
    assert fenced_errors >= 5  # every add issued after the recovery returned failed
    assert all(k not in acked for k in range(last + 1, max(pushed) + 1))
    assert max(acked) <= last
    entries = await rh.read(0, last)
    assert [e.entry_id for e in entries] == list(range(last + 1))
    for e in entries:
        assert e.data == pushed[e.entry_id]
    for eid, data in acked.items():
        assert entries[eid].data == data
    with pytest.raises(api.LedgerFencedError):
        await wh.add_entry(b"one more")
    with pytest.raises(api.LedgerFencedError):
        await wh.close()
    await writer.aclose()
    await recoverer.aclose()
