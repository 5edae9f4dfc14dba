"""LedgerStorage: add/read, fencing, master key, checkpoint, restart replay."""

from __future__ import annotations

import pytest

from magnetar.bookie.api import (
    LAST_ENTRY,
    BadRequestError,
    BookieReadOnlyError,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedAccessError,
)
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import decode_entry, encode_entry
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.storage import LedgerStorage

KEY = b"secret"


def entry(ledger: int, eid: int, payload: bytes | None = None, lac: int | None = None) -> bytes:
    payload = payload if payload is not None else f"payload-{ledger}-{eid}".encode() * 3
    return encode_entry(ledger, eid, eid - 1 if lac is None else lac, 0, payload)


def make_config(tmp_path, **kw) -> BookieConfig:
    kw.setdefault("journal_max_group_wait_ms", 0)
    return BookieConfig.for_data_dir(str(tmp_path), **kw)


async def open_storage(tmp_path, **kw) -> LedgerStorage:
    s = LedgerStorage(make_config(tmp_path, **kw), bookie_id="bk-test")
    await s.open()
    return s


async def test_add_then_read_back_from_cache_and_after_checkpoint(tmp_path):
    s = await open_storage(tmp_path)
    try:
        for i in range(20):
            await s.add_entry(1, i, KEY, entry(1, i))
        assert await s.read_entry(1, 5) == entry(1, 5)
        await s.checkpoint()
        for i in range(20):
            data = await s.read_entry(1, i)
            header, payload = decode_entry(data, 1, i)
            assert payload == f"payload-1-{i}".encode() * 3
        assert await s.read_entry(1, LAST_ENTRY) == entry(1, 19)
        assert await s.read_lac(1) == 18
        with pytest.raises(NoSuchEntryError):
            await s.read_entry(1, 99)
        with pytest.raises(NoSuchLedgerError):
            await s.read_entry(2, 0)
        assert await s.read_lac(2) == -1
    finally:
        await s.aclose()


async def test_bad_requests_and_master_key(tmp_path):
    s = await open_storage(tmp_path)
    try:
        with pytest.raises(BadRequestError):
            await s.add_entry(1, 0, KEY, b"short")
        with pytest.raises(BadRequestError):
            await s.add_entry(1, 1, KEY, entry(1, 0))  # header disagrees with request
        await s.add_entry(1, 0, KEY, entry(1, 0))
        with pytest.raises(UnauthorizedAccessError):
            await s.add_entry(1, 1, b"other", entry(1, 1))
    finally:
        await s.aclose()


async def test_fencing_blocks_normal_adds_not_recovery_adds_and_survives_restart(tmp_path):
    s = await open_storage(tmp_path)
    await s.add_entry(7, 0, KEY, entry(7, 0))
    await s.add_entry(7, 1, KEY, entry(7, 1))
    last = await s.read_entry(7, LAST_ENTRY, fence=True, master_key=KEY)
    assert last == entry(7, 1)
    with pytest.raises(LedgerFencedError):
        await s.add_entry(7, 2, KEY, entry(7, 2))
    await s.add_entry(7, 2, KEY, entry(7, 2), recovery=True)
    with pytest.raises(UnauthorizedAccessError):
        await s.read_entry(7, 0, fence=True, master_key=b"wrong")
    # fencing a ledger this bookie never saw creates it fenced, with no entries
    with pytest.raises(NoSuchEntryError):
        await s.read_entry(8, LAST_ENTRY, fence=True, master_key=KEY)
    await s.aclose()
    # kill-style restart is covered elsewhere; here: a clean restart keeps the fence
    s2 = await open_storage(tmp_path)
    try:
        with pytest.raises(LedgerFencedError):
            await s2.add_entry(7, 3, KEY, entry(7, 3))
        with pytest.raises(LedgerFencedError):
            await s2.add_entry(8, 0, KEY, entry(8, 0))
        assert await s2.read_entry(7, 2) == entry(7, 2)
    finally:
        await s2.aclose()


async def test_restart_replays_journal_written_after_the_last_checkpoint(tmp_path):
    s = await open_storage(tmp_path)
    for i in range(10):
        await s.add_entry(3, i, KEY, entry(3, i))
    await s.checkpoint()
    for i in range(10, 25):
        await s.add_entry(3, i, KEY, entry(3, i))
    # simulate a crash: stop without the final checkpoint (abandon the process state)
    await s.journal.aclose()
    await s.supervisor.aclose()
    s.index.close()
    s2 = await open_storage(tmp_path)
    try:
        assert s2.mark >= s.mark
        for i in range(25):
            assert await s2.read_entry(3, i) == entry(3, i)
        assert await s2.read_entry(3, LAST_ENTRY) == entry(3, 24)
        assert await s2.read_lac(3) == 23
    finally:
        await s2.aclose()


async def test_checkpoint_deletes_old_journal_files(tmp_path):
    s = await open_storage(tmp_path, journal_max_size_mb=0)  # rotate on every group
    try:
        for i in range(6):
            await s.add_entry(1, i, KEY, entry(1, i))
        assert len(list(s.journal.file_ids())) >= 6
        await s.checkpoint()
        await s.add_entry(1, 6, KEY, entry(1, 6))
        await s.checkpoint()
        assert len(list(s.journal.file_ids())) <= 2
        for i in range(7):
            assert await s.read_entry(1, i) == entry(1, i)
    finally:
        await s.aclose()


async def test_write_cache_full_triggers_flush(tmp_path):
    s = await open_storage(tmp_path, write_cache_max_size_mb=1)
    try:
        big = b"x" * 100_000
        for i in range(40):  # 4 MB through a 1 MB cache
            await s.add_entry(1, i, KEY, entry(1, i, big))
        assert s.statistics()["write_cache_bytes"] <= 1024 * 1024 + 200_000
        for i in range(40):
            assert await s.read_entry(1, i) == entry(1, i, big)
    finally:
        await s.aclose()


async def test_read_only_refuses_adds_but_serves_reads(tmp_path):
    s = await open_storage(tmp_path)
    client = LocalBookieClient(s)
    try:
        await client.add_entry(1, 0, KEY, entry(1, 0))
        s.set_read_only(True, "test")
        with pytest.raises(BookieReadOnlyError):
            await client.add_entry(1, 1, KEY, entry(1, 1))
        assert await client.read_entry(1, 0) == entry(1, 0)
        info = await client.get_info()
        assert info.read_only and info.bookie_id == "bk-test" and info.total_disk_bytes > 0
        s.set_read_only(False)
        await client.add_entry(1, 1, KEY, entry(1, 1))
    finally:
        await client.aclose()
        await s.aclose()


async def test_wait_lac_long_poll(tmp_path):
    import asyncio

    s = await open_storage(tmp_path)
    client = LocalBookieClient(s)
    try:
        await client.add_entry(1, 0, KEY, entry(1, 0, lac=-1))
        assert await client.wait_lac(1, 5, 10) == -1  # times out, returns current
        waiter = asyncio.ensure_future(client.wait_lac(1, -1, 5_000))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await client.add_entry(1, 1, KEY, entry(1, 1, lac=0))
        assert await asyncio.wait_for(waiter, 2) == 0
    finally:
        await client.aclose()
        await s.aclose()


async def test_replay_of_a_long_journal_in_bounded_chunks(tmp_path, monkeypatch):
    import magnetar.bookie.journal_files as journal_mod
    from magnetar.runtime import Rng

    rng = Rng(7)
    s = await open_storage(tmp_path, write_cache_max_size_mb=4)
    s._trigger_checkpoint = lambda: None  # keep everything in the journal only
    expected = {}
    for i in range(300):
        data = entry(5, i, rng.randbytes(rng.randint(10, 8000)))
        await s.add_entry(5, i, KEY, data)
        expected[i] = data
    await s.journal.aclose()  # crash: no checkpoint, the journal holds it all
    await s.supervisor.aclose()
    s.index.close()
    monkeypatch.setattr(journal_mod, "_REPLAY_CHUNK_BYTES", 4096)  # smaller than many records
    s2 = LedgerStorage(make_config(tmp_path, write_cache_max_size_mb=1), bookie_id="bk-test")
    flushes = []
    real = s2._checkpoint_now

    async def counting(mark=None):
        flushes.append(mark)
        return await real(mark)

    s2._checkpoint_now = counting
    assert await s2.open() == 301  # 300 adds + the master key record
    try:
        assert len(flushes) >= 2  # flushed while replaying, not all at the end
        for i, data in expected.items():
            assert await s2.read_entry(5, i) == data
    finally:
        await s2.aclose()


async def test_fence_racing_with_adds_every_acked_add_is_visible_to_the_fencer(tmp_path):
    import asyncio

    s = await open_storage(tmp_path, journal_max_group_wait_ms=1)
    try:
        await s.add_entry(9, 0, KEY, entry(9, 0))
        outcomes: dict[int, str] = {}

        async def add(i: int) -> None:
            await asyncio.sleep(i * 0.0003)  # adds keep arriving before, during and after the fence
            try:
                await s.add_entry(9, i, KEY, entry(9, i))
                outcomes[i] = "acked"
            except LedgerFencedError:
                outcomes[i] = "fenced"

        tasks = [asyncio.ensure_future(add(i)) for i in range(1, 201)]
        await asyncio.sleep(0.02)
        fence_last = await s.read_entry(9, LAST_ENTRY, fence=True, master_key=KEY)
        seen_by_fencer = parse_last(fence_last)
        await asyncio.gather(*tasks)
        acked = [i for i, o in outcomes.items() if o == "acked"]
        assert "fenced" in outcomes.values()
        # everything acknowledged was durable before the fence answered: the recovering
        # reader's view of the last entry covers it
        assert all(i <= seen_by_fencer for i in acked), (max(acked), seen_by_fencer)
        for i in acked:
            assert await s.read_entry(9, i) == entry(9, i)
    finally:
        await s.aclose()


def parse_last(data: bytes) -> int:
    return decode_entry(data)[0].entry_id


async def test_deleted_ledger_stays_deleted_across_a_crash_and_its_marker_is_pruned(tmp_path):
    from magnetar.bookie.index import ledger_key

    s = await open_storage(tmp_path)
    for i in range(5):
        await s.add_entry(1, i, KEY, entry(1, i))
        await s.add_entry(2, i, KEY, entry(2, i))
    assert await s.delete_ledger(1)
    # crash before any checkpoint: the journal still holds ledger 1's adds
    await s.journal.aclose()
    await s.supervisor.aclose()
    s.index.close()
    s2 = await open_storage(tmp_path)
    try:
        with pytest.raises(NoSuchLedgerError):
            await s2.read_entry(1, 0)  # the replay did not bring it back
        assert await s2.read_entry(2, 4) == entry(2, 4)
        assert 1 in s2.ledgers and s2.ledgers[1].deleted
        await s2.add_entry(2, 5, KEY, entry(2, 5))
        await s2.checkpoint()  # the mark is past every record of ledger 1: marker goes
        assert 1 not in s2.ledgers
        assert s2.index.get(ledger_key(1)) is None
        assert s2.ledger_ids() == [2]
    finally:
        await s2.aclose()
    s3 = await open_storage(tmp_path)
    try:
        with pytest.raises(NoSuchLedgerError):
            await s3.read_entry(1, 0)
        assert await s3.read_entry(2, 5) == entry(2, 5)
    finally:
        await s3.aclose()


async def test_read_ahead_fills_the_read_cache_but_never_with_stale_copies(tmp_path):
    s = await open_storage(tmp_path)
    for i in range(20):
        await s.add_entry(1, i, KEY, entry(1, i))
    await s.checkpoint()
    await s.read_entry(1, 0, fence=True, master_key=KEY)
    newer = entry(1, 5, b"rewritten by recovery")
    await s.add_entry(1, 5, KEY, newer, recovery=True)
    await s.checkpoint()  # the new copy of 1:5 lives in a later part of the log
    await s.aclose()
    s2 = await open_storage(tmp_path)
    try:
        assert await s2.read_entry(1, 0) == entry(1, 0)
        hits_before = s2._read_cache.hits
        for i in range(1, 5):
            assert await s2.read_entry(1, i) == entry(1, i)
        assert s2._read_cache.hits - hits_before == 4  # read ahead by the first miss
        assert await s2.read_entry(1, 5) == newer  # not the stale copy next to entry 4
        for i in range(6, 20):
            assert await s2.read_entry(1, i) == entry(1, i)
    finally:
        await s2.aclose()


async def test_several_ledger_directories_spread_ledgers_and_survive_restart_and_compaction(tmp_path):
    import os

    from magnetar.bookie.gc import GarbageCollector

    dirs = (str(tmp_path / "l0"), str(tmp_path / "l1"))
    kw = dict(ledger_directories=dirs, entry_log_size_limit_bytes=16 * 1024)
    s = await open_storage(tmp_path, **kw)
    for i in range(30):
        for lid in (10, 11, 12, 13):
            await s.add_entry(lid, i, KEY, entry(lid, i, b"z" * 900))
        if i % 10 == 9:
            await s.checkpoint()
    logs = {d: [n for n in os.listdir(f"{d}/current") if n.endswith(".log")] for d in dirs}
    assert logs[dirs[0]] and logs[dirs[1]]  # even ledgers in l0, odd ones in l1
    await s.delete_ledger(10)
    await s.delete_ledger(11)
    result = await GarbageCollector(s, None, s.config, s.clock).compact(0.9)  # type: ignore[arg-type]
    assert result.logs_compacted
    await s.aclose()
    s2 = await open_storage(tmp_path, **kw)
    try:
        for lid in (12, 13):
            for i in range(30):
                assert await s2.read_entry(lid, i) == entry(lid, i, b"z" * 900)
        with pytest.raises(NoSuchLedgerError):
            await s2.read_entry(11, 0)
    finally:
        await s2.aclose()
