"""The in-process bookie client still bounds every call, with one watchdog, not a timer per call."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.bookie.api import BookieTimeoutError
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.storage import LedgerStorage


@pytest.fixture
async def storage(tmp_path):
    st = LedgerStorage(BookieConfig.for_data_dir(str(tmp_path / "b"), journal_sync_data=False), bookie_id="b")
    await st.open()
    yield st
    await st.aclose()


async def test_a_stuck_call_times_out_and_others_are_untouched(storage, monkeypatch) -> None:
    client = LocalBookieClient(storage, timeout_ms=200)
    await client.add_entry(1, 0, b"k", encode_entry(1, 0, -1, 0, b"x"))
    gate = asyncio.Event()

    async def stuck(ledger_id: int) -> int:
        await gate.wait()
        return 0

    monkeypatch.setattr(storage, "read_lac", stuck)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(BookieTimeoutError):
        await client.read_lac(1)
    elapsed = loop.time() - t0
    assert 0.2 <= elapsed < 1.0, elapsed
    # fast calls keep working and never trip the watchdog, even across many ticks
    for e in range(1, 200):
        await client.add_entry(1, e, b"k", encode_entry(1, e, e - 1, 0, b"y"))
    assert (await client.read_entry(1, 199))[-1:] == b"y"
    assert not client._calls and not client._expired
    await asyncio.sleep(0.1)
    assert client._watchdog is None  # no timer left armed when idle
    await client.aclose()


async def test_an_outside_cancel_is_not_turned_into_a_timeout(storage, monkeypatch) -> None:
    client = LocalBookieClient(storage, timeout_ms=5_000)

    async def stuck(ledger_id: int) -> int:
        await asyncio.sleep(10)
        return 0

    monkeypatch.setattr(storage, "read_lac", stuck)
    task = asyncio.ensure_future(client.read_lac(1))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not client._calls
    await client.aclose()
