"""The add hot path without tasks (``add_entry_nowait``): same results, same failure handling.

The ledger handle sends to a bookie client that offers ``add_entry_nowait``
without a task and times the send out with its own watchdog; these tests run
the ensemble-change scenarios through that path (a fake bookie client given
a nowait method) and check the real in-process bookie takes it without a task
per add.
"""

from __future__ import annotations

import asyncio

import pytest
from bk_helpers import make_env

from magnetar.bookie.config import BookieConfig
from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.clock import virtual_time
from magnetar.testing.fake_bookie import FakeBookieClient, FakeBookiePool

_HANGING: list[asyncio.Task[None]] = []


def _nowait(self, ledger_id, entry_id, master_key, entry, *, recovery=False):  # type: ignore[no-untyped-def]
    """A nowait add for the fake: a future the fake bookie completes (or never, when it hangs)."""
    task = asyncio.get_running_loop().create_task(
        self.add_entry(ledger_id, entry_id, master_key, entry, recovery=recovery)
    )
    _HANGING.append(task)
    return task


@pytest.fixture
def nowait_fake(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(FakeBookieClient, "add_entry_nowait", _nowait, raising=False)
    yield
    for t in _HANGING:
        t.cancel()
    _HANGING.clear()


async def _write(wh, datas):  # type: ignore[no-untyped-def]
    return await asyncio.gather(*(wh.add_entry(d) for d in datas))


@virtual_time
async def test_nowait_silent_bookie_is_replaced_after_the_add_timeout(nowait_fake) -> None:  # type: ignore[no-untyped-def]
    env = await make_env(4)
    wh = await env.bk.create_ledger(3, 3, 3)
    await wh.add_entry(b"0")
    silent = wh.metadata.ensembles[0][1][0]
    env.pool[silent].hang = True
    t0 = env.clock.monotonic()
    futs = [wh.add_entry_nowait(d) for d in (b"1", b"2", b"3")]
    assert all(f is not None for f in futs)
    assert await asyncio.gather(*futs) == [1, 2, 3]
    assert env.clock.monotonic() - t0 >= env.config.add_timeout_ms / 1000.0
    assert silent not in wh.metadata.ensembles[-1][1]
    await wh.close()
    reader = await env.client().open_ledger(wh.ledger_id)
    assert [e.data for e in await reader.read(0, 3)] == [b"0", b"1", b"2", b"3"]


@virtual_time
async def test_nowait_crashed_bookie_mid_stream_keeps_order_and_entries(nowait_fake) -> None:  # type: ignore[no-untyped-def]
    env = await make_env(5)
    wh = await env.bk.create_ledger(3, 2, 2)
    first = [b"a%d" % i for i in range(10)]
    assert await _write(wh, first) == list(range(10))
    env.pool[wh.metadata.ensembles[0][1][1]].crash()
    second = [b"b%d" % i for i in range(30)]
    assert await asyncio.gather(*(wh.add_entry_nowait(d) for d in second)) == list(range(10, 40))
    assert wh.ensemble_changes == 1
    await wh.close()
    reader = await env.client().open_ledger(wh.ledger_id)
    assert [e.data for e in await reader.read(0, 39)] == first + second


@virtual_time
async def test_nowait_fenced_ledger_fails_the_add(nowait_fake) -> None:  # type: ignore[no-untyped-def]
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 2)
    assert await _write(wh, [b"x", b"y"]) == [0, 1]
    await env.client().open_ledger(wh.ledger_id)  # recovery fences it
    fut = wh.add_entry_nowait(b"late")
    from magnetar.bookkeeper import api

    with pytest.raises(api.LedgerFencedError):
        await fut


async def test_the_local_bookie_takes_adds_without_a_task_each(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = RealClock()
    cfg = BookieConfig.for_data_dir(str(tmp_path / "bookie"), journal_max_group_wait_ms=1)
    storage = LedgerStorage(cfg, clock=clock, bookie_id="127.0.0.1:3181")
    await storage.open()
    pool = LocalBookieClientPool(LocalBookieClient(storage, timeout_ms=5_000))
    server = MemoryMetadataServer(clock=clock)
    await FakeBookiePool().register(server.session(), only=["127.0.0.1:3181"])
    bk = BookKeeperClient(server.session(), pool, clock, Rng(1), ClientConfig())
    try:
        wh = await bk.create_ledger(1, 1, 1, password=b"pw")
        await wh.add_entry(b"first")  # the ledger's first entry on the bookie: the coroutine path
        before = len(asyncio.all_tasks())
        datas = [b"%d" % i * 50 for i in range(200)]
        futs = [wh.add_entry_nowait(d) for d in datas]
        assert len(asyncio.all_tasks()) == before  # no task per add
        assert await asyncio.gather(*futs) == list(range(1, 201))
        assert [e.data for e in await wh.read(1, 200)] == datas
        await wh.close()
    finally:
        await bk.aclose()
        await pool.aclose()
        await storage.aclose()
