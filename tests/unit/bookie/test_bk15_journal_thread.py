"""The journal's writer thread and group completion (issue 15, the bookie's add path).

Pins: groups complete in enqueue order (futures and the storage's group hook); an
fsync error fails every add of its group with a clear error and loses nothing that
was acknowledged; the writer thread needs no executor call per group; the
storage's task-free add is readable once its future completes.
"""

from __future__ import annotations

import asyncio
import errno
import threading
import time

import pytest

from magnetar.bookie.api import BookieError
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk import RealAppendFile, RealDisk
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.journal import START, Journal, JournalRecord, RecordType
from magnetar.bookie.storage import LedgerStorage
from magnetar.runtime import BlockingExecutor, RealClock, TaskSupervisor


class CountingExecutor(BlockingExecutor):
    def __init__(self, name: str, max_threads: int = 1) -> None:
        super().__init__(name, max_threads)
        self.calls = 0

    async def run(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        return await super().run(fn, *args, **kwargs)


class SlowFsyncFile(RealAppendFile):
    """fsync takes 10 ms (so groups form) and fails with EIO on the chosen calls."""

    fail_on: set[int] = set()
    calls = 0
    lock = threading.Lock()

    def fsync(self):
        with SlowFsyncFile.lock:
            SlowFsyncFile.calls += 1
            n = SlowFsyncFile.calls
        time.sleep(0.01)
        if n in SlowFsyncFile.fail_on:
            raise OSError(errno.EIO, "Input/output error (injected)")
        super().fsync()


class SlowFsyncDisk(RealDisk):
    def open_append(self, path):
        return SlowFsyncFile(path)


async def started(tmp_path, disk=None, executor=None, **kw):
    ex = executor or BlockingExecutor("bk15-journal")
    sup = TaskSupervisor("bk15")
    j = Journal(str(tmp_path / "journal"), disk or RealDisk(), ex, RealClock(), sup, **kw)
    await j.replay(START, lambda r: None)
    j.start()
    return j, ex, sup


async def stop(j, ex, sup):
    await j.aclose()
    await sup.aclose()
    await ex.aclose()


async def replayed_ids(tmp_path) -> list[int]:
    ex = BlockingExecutor("bk15-replay")
    sup = TaskSupervisor("bk15-replay")
    j = Journal(str(tmp_path / "journal"), RealDisk(), ex, RealClock(), sup)
    out: list[JournalRecord] = []
    await j.replay(START, out.append)
    await stop(j, ex, sup)
    return [r.entry_id for r in out]


async def test_groups_complete_in_enqueue_order_with_one_hook_call_per_group(tmp_path):
    j, ex, sup = await started(tmp_path, disk=SlowFsyncDisk())
    SlowFsyncFile.fail_on = set()
    hooked: list[list[int]] = []
    j.on_durable_group = lambda items, latency_ms: hooked.append(list(items))
    completed: list[int] = []
    futs = []
    for burst in range(10):
        for i in range(burst * 50, burst * 50 + 50):
            f = j.append_fields_nowait(RecordType.ADD, 1, i, b"x" * 100, item=i)
            f.add_done_callback(lambda _f, i=i: completed.append(i))
            futs.append(f)
        await asyncio.sleep(0.003)  # bursts land while a group syncs
    await asyncio.gather(*futs)
    await asyncio.sleep(0)  # the last done callbacks
    positions = [f.result() for f in futs]
    stats = j.statistics()
    assert j._thread is not None and j._thread.is_alive()
    await stop(j, ex, sup)
    assert completed == list(range(500))
    assert [i for items in hooked for i in items] == list(range(500))  # hook sees every add, in order
    assert len(hooked) == stats["groups"] < 500  # once per group, and groups formed
    assert positions == sorted(positions)
    assert j.synced_count == j.enqueued_count == 500
    assert j.add_latency.count == 500 and j.sync_latency.count == stats["groups"]
    assert await replayed_ids(tmp_path) == list(range(500))


async def test_an_fsync_error_fails_its_whole_group_and_loses_nothing_acknowledged(tmp_path):
    SlowFsyncFile.calls = 0
    SlowFsyncFile.fail_on = {4}  # the file header's fsync is call 1; then one per group
    j, ex, sup = await started(tmp_path, disk=SlowFsyncDisk())
    futs = []
    for burst in range(8):
        futs += [j.append_fields_nowait(RecordType.ADD, 1, burst * 20 + k, b"y" * 64) for k in range(20)]
        await asyncio.sleep(0.004)
    results = await asyncio.gather(*futs, return_exceptions=True)
    failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
    acked = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    assert failed, "the injected fsync error failed nobody"
    for i in failed:  # a clear, typed error
        err = results[i]
        assert (
            isinstance(err, BookieError) and "journal write failed" in str(err) and "Input/output" in str(err)
        )
    # the failed adds are one group: consecutive, everything before and after it durable
    assert failed == list(range(failed[0], failed[-1] + 1))
    assert 1 < len(failed) < 160
    assert j.broken is None
    later = await j.append_fields_nowait(RecordType.ADD, 1, 1000, b"z")  # the journal goes on
    assert later.offset > 0
    await stop(j, ex, sup)
    on_disk = await replayed_ids(tmp_path)
    assert set(acked) <= set(on_disk) and not set(failed) & set(on_disk)
    assert on_disk == [*acked, 1000]


async def test_the_writer_thread_needs_no_executor_call_per_group(tmp_path):
    ex = CountingExecutor("bk15-count")
    j, ex, sup = await started(tmp_path, executor=ex)
    before = ex.calls
    for i in range(20):  # a lone writer: 20 groups of one
        await j.append_fields_nowait(RecordType.ADD, 1, i, b"a" * 10)
    stats = j.statistics()
    calls = ex.calls - before
    await stop(j, ex, sup)
    assert stats["groups"] == 20 and stats["fsyncs"] >= 20
    assert calls == 0


async def test_close_fails_what_was_never_written_and_stops_the_thread(tmp_path):
    j, ex, sup = await started(tmp_path)
    f = j.append_fields_nowait(RecordType.ADD, 1, 0, b"a")
    await f
    thread = j._thread
    await stop(j, ex, sup)
    assert thread is not None and not thread.is_alive()
    with pytest.raises(BookieError):
        j.append_fields_nowait(RecordType.ADD, 1, 1, b"b")


async def test_storage_nowait_add_is_readable_once_its_future_completes(tmp_path):
    cfg = BookieConfig.for_data_dir(str(tmp_path))
    storage = LedgerStorage(cfg, bookie_id="bk15")
    await storage.open()
    try:
        await storage.add_entry(7, 0, b"k", encode_entry(7, 0, -1, 0, b"first"))
        futs = [
            storage.add_entry_nowait(7, e, b"k", encode_entry(7, e, e - 1, 0, b"p%d" % e))
            for e in range(1, 200)
        ]
        assert all(f is not None for f in futs)
        for e, f in enumerate(futs, start=1):
            await f  # type: ignore[misc]
            assert await storage.read_entry(7, e) == encode_entry(7, e, e - 1, 0, b"p%d" % e)
        assert await storage.read_lac(7) == 198
        assert storage.add_latency.count == 200
        assert storage.journal.add_latency.count == 201  # + the master-key record
    finally:
        await storage.aclose()
