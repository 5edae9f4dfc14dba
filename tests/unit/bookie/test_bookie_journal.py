"""Journal: group commit, torn tails, failed writes never acknowledged."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest

from magnetar.bookie.api import DiskFullError
from magnetar.bookie.disk import RealAppendFile, RealDisk
from magnetar.bookie.journal import (
    FILE_HEADER_SIZE,
    START,
    Journal,
    JournalRecord,
    RecordType,
    journal_file_name,
    scan_records,
)
from magnetar.runtime import BlockingExecutor, RealClock, TaskSupervisor


class CountingFile(RealAppendFile):
    fail_next_write_after_bytes: int | None = None

    def write(self, data):
        limit = CountingFile.fail_next_write_after_bytes
        if limit is not None:
            CountingFile.fail_next_write_after_bytes = None
            super().write(bytes(data)[:limit])  # a partial write, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        super().write(data)


class FlakyDisk(RealDisk):
    def open_append(self, path):
        return CountingFile(path)


def make_journal(tmp_path, disk=None, **kw) -> tuple[Journal, BlockingExecutor, TaskSupervisor]:
    ex = BlockingExecutor("test-journal")
    sup = TaskSupervisor("test")
    j = Journal(str(tmp_path / "journal"), disk or RealDisk(), ex, RealClock(), sup, **kw)
    return j, ex, sup


async def close(j, ex, sup):
    await j.aclose()
    await sup.aclose()
    await ex.aclose()


def append_bytes(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def rec(i: int, size: int = 100) -> JournalRecord:
    return JournalRecord(RecordType.ADD, 1, i, bytes([i % 256]) * size)


async def replay_all(tmp_path) -> list[JournalRecord]:
    j, ex, sup = make_journal(tmp_path)
    out: list[JournalRecord] = []
    await j.replay(START, out.append)
    await close(j, ex, sup)
    return out


async def test_group_commit_many_adds_few_fsyncs(tmp_path):
    j, ex, sup = make_journal(tmp_path, max_group_wait_ms=5)
    await j.replay(START, lambda r: None)
    j.start()
    durable: list[int] = []
    await asyncio.gather(*(j.append(rec(i), lambda i=i: durable.append(i)) for i in range(500)))
    stats = j.statistics()
    await close(j, ex, sup)
    assert stats["records"] == 500
    assert stats["fsyncs"] < 100, stats  # grouped, not one fsync per add
    assert durable == list(range(500))  # callbacks in journal order
    assert [r.entry_id for r in await replay_all(tmp_path)] == list(range(500))


async def test_group_bounded_by_count(tmp_path):
    j, ex, sup = make_journal(tmp_path, max_group_wait_ms=50, group_records_max=10)
    await j.replay(START, lambda r: None)
    j.start()
    await asyncio.gather(*(j.append(rec(i)) for i in range(100)))
    stats = j.statistics()
    await close(j, ex, sup)
    assert stats["groups"] >= 10


async def test_lone_writer_does_not_wait_for_the_group_window(tmp_path):
    # journalFlushWhenQueueEmpty (the default): one add at a time is flushed at once, so
    # its latency is its own write + fsync, not the 500 ms group window.
    j, ex, sup = make_journal(tmp_path, max_group_wait_ms=500)
    await j.replay(START, lambda r: None)
    j.start()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for i in range(5):
        await j.append(rec(i))
    elapsed = loop.time() - t0
    stats = j.statistics()
    await close(j, ex, sup)
    assert elapsed < 0.5 * 5 / 2, elapsed  # far below 5 group windows
    assert stats["groups"] == 5 and stats["fsyncs"] == 5
    assert [r.entry_id for r in await replay_all(tmp_path)] == list(range(5))


async def test_lone_writer_waits_for_the_window_without_flush_when_queue_empty(tmp_path):
    j, ex, sup = make_journal(tmp_path, max_group_wait_ms=100, flush_when_queue_empty=False)
    await j.replay(START, lambda r: None)
    j.start()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for i in range(3):
        await j.append(rec(i))
    elapsed = loop.time() - t0
    await close(j, ex, sup)
    assert elapsed >= 0.3 * 0.9, elapsed


async def test_appends_queued_during_an_fsync_form_the_next_group(tmp_path):
    # Grouping under load comes from the queue filling while the previous group syncs.
    class SlowSyncFile(RealAppendFile):
        def fsync(self):
            import time

            time.sleep(0.02)
            super().fsync()

    class SlowDisk(RealDisk):
        def open_append(self, path):
            return SlowSyncFile(path)

    j, ex, sup = make_journal(tmp_path, disk=SlowDisk(), max_group_wait_ms=0)
    await j.replay(START, lambda r: None)
    j.start()

    async def writer(w: int) -> None:
        for i in range(10):
            await j.append(rec(w * 100 + i))

    await asyncio.gather(*(writer(w) for w in range(20)))
    stats = j.statistics()
    await close(j, ex, sup)
    assert stats["records"] == 200
    assert stats["groups"] <= 40, stats  # ~10-11 groups of ~20, not 200 single fsyncs


async def test_torn_tail_is_truncated_not_misread(tmp_path):
    j, ex, sup = make_journal(tmp_path)
    await j.replay(START, lambda r: None)
    j.start()
    for i in range(10):
        await j.append(rec(i))
    await close(j, ex, sup)
    path = tmp_path / "journal" / "current" / journal_file_name(1)
    good_size = path.stat().st_size
    whole = rec(10).encode()
    # a crash mid-write: half of the next record
    append_bytes(path, whole[: len(whole) // 2])
    records = await replay_all(tmp_path)
    assert [r.entry_id for r in records] == list(range(10))
    assert path.stat().st_size == good_size  # truncated at the last intact record
    # corrupted bytes (right length, wrong CRC) are also a torn tail
    append_bytes(path, whole[:-1] + bytes([whole[-1] ^ 0xFF]))
    records = await replay_all(tmp_path)
    assert [r.entry_id for r in records] == list(range(10))
    assert path.stat().st_size == good_size


def test_scan_records_every_prefix_is_safe():
    data = b"".join(rec(i, 10).encode() for i in range(3))
    for cut in range(len(data) + 1):
        res = scan_records(data[:cut], 0)
        # every returned record is intact and in order; nothing beyond good_end
        assert [r.entry_id for r in res.records] == list(range(len(res.records)))
        assert res.torn == (res.good_end != cut)


async def test_enospc_fails_the_group_and_keeps_the_journal_clean(tmp_path):
    j, ex, sup = make_journal(tmp_path, disk=FlakyDisk())
    await j.replay(START, lambda r: None)
    j.start()
    await j.append(rec(0))
    CountingFile.fail_next_write_after_bytes = 37
    with pytest.raises(DiskFullError):
        await j.append(rec(1))
    await j.append(rec(2))  # the disk has room again
    await close(j, ex, sup)
    assert [r.entry_id for r in await replay_all(tmp_path)] == [0, 2]


async def test_rotation_and_delete_before(tmp_path):
    j, ex, sup = make_journal(tmp_path, file_size_max_bytes=FILE_HEADER_SIZE + 10)
    await j.replay(START, lambda r: None)
    j.start()
    positions = [await j.append(rec(i)) for i in range(5)]
    assert [p.file_id for p in positions] == [1, 2, 3, 4, 5]
    assert await j.delete_files_before(positions[3]) == 3
    await close(j, ex, sup)
    assert sorted(os.listdir(tmp_path / "journal" / "current")) == [
        journal_file_name(4),
        journal_file_name(5),
    ]
    out: list[JournalRecord] = []
    j, ex, sup = make_journal(tmp_path)
    await j.replay(positions[3], out.append)  # from the mark: only what came after
    await close(j, ex, sup)
    assert [r.entry_id for r in out] == [4]


async def test_close_during_group_wait_completes_the_group(tmp_path):
    j, ex, sup = make_journal(tmp_path, max_group_wait_ms=200, flush_when_queue_empty=False)
    await j.replay(START, lambda r: None)
    j.start()
    pending = asyncio.ensure_future(j.append(rec(0)))
    await asyncio.sleep(0.02)  # the writer has taken it and is waiting for more
    await j.aclose()
    assert pending.done() and pending.result().file_id == 1
    await sup.aclose()
    await ex.aclose()
    assert [r.entry_id for r in await replay_all(tmp_path)] == [0]


async def test_preallocated_zero_tail_after_a_crash_is_cut_quietly(tmp_path, caplog):
    j, ex, sup = make_journal(tmp_path, prealloc_bytes=1024 * 1024)
    await j.replay(START, lambda r: None)
    j.start()
    positions = [await j.append(rec(i)) for i in range(5)]
    path = tmp_path / "journal" / "current" / journal_file_name(1)
    assert path.stat().st_size >= 1024 * 1024 > positions[-1].offset  # zero-filled room
    await sup.aclose()  # "crash": the writer stops, the file keeps its zero tail
    await ex.aclose()
    with caplog.at_level("WARNING", logger="magnetar.bookie.journal"):
        assert [r.entry_id for r in await replay_all(tmp_path)] == list(range(5))
    assert "torn tail" not in caplog.text
    assert path.stat().st_size == positions[-1].offset
