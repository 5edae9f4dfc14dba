"""The assembled bookie: GC + compaction reclaim disk, disk-full read-only, cookies, registration."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil

import pytest

from magnetar.bookie.api import (
    AVAILABLE_PATH,
    COOKIES_PATH,
    READONLY_PATH,
    BookieReadOnlyError,
    DiskFullError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ledger_path,
)
from magnetar.bookie.app import Bookie
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk import DiskUsage, RealAppendFile, RealDisk
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.registration import CookieMismatchError
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Rng

KEY = b"k"


def entry(lid: int, eid: int, size: int = 2000) -> bytes:
    return encode_entry(lid, eid, eid - 1, 0, bytes([lid % 256, eid % 256]) * (size // 2))


def dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except FileNotFoundError:
                pass
    return total


def cfg(tmp_path, name="bk", **kw) -> BookieConfig:
    base = dict(bookie_id=name, journal_max_group_wait_ms=0, disk_check_interval_ms=3_600_000)
    base.update(kw)
    return BookieConfig.for_data_dir(str(tmp_path / name), **base)


class FakeUsageDisk(RealDisk):
    """The real file system, but reporting whatever usage the test sets."""

    def __init__(self) -> None:
        self.used_fraction = 0.10
        self.fail_writes = False

    def usage(self, path: str) -> DiskUsage:
        total = 100 * 1024**3
        return DiskUsage(total, int(total * (1 - self.used_fraction)))

    def open_append(self, path: str):  # type: ignore[no-untyped-def]
        disk = self

        class MaybeFull(RealAppendFile):
            def write(self, data):  # type: ignore[no-untyped-def]
                if disk.fail_writes:
                    super().write(bytes(data)[:5])
                    raise OSError(errno.ENOSPC, "No space left on device")
                super().write(data)

        return MaybeFull(path)


async def wait_for_path(store, path: str, present: bool = True) -> None:
    for _ in range(200):
        if (await store.exists(path) is not None) == present:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} {'never appeared' if present else 'never went away'}")


async def test_gc_and_compaction_reclaim_disk_and_keep_live_ledgers(tmp_path):
    server = MemoryMetadataServer()
    store = server.session()
    config = cfg(tmp_path, entry_log_size_limit_bytes=64 * 1024)
    bk = Bookie(config, store, serve=False)
    await bk.start()
    client = bk.local_client()
    ledgers = list(range(1, 7))
    for lid in ledgers:
        await store.put(ledger_path(lid), b"{}")
    for eid in range(40):  # interleaved: every entry log holds all six ledgers
        await asyncio.gather(*(client.add_entry(lid, eid, KEY, entry(lid, eid)) for lid in ledgers))
        if eid % 5 == 4:
            await bk.storage.checkpoint()
    await bk.storage.checkpoint()
    ledger_dir = config.ledger_directories[0]
    before = dir_bytes(ledger_dir)
    logs_before = len(bk.storage.entry_logger.log_ids())
    for lid in (1, 2, 3, 4):
        await store.delete(ledger_path(lid))
    assert bk.gc is not None
    result = await bk.gc.run_once(force_major=True)
    assert sorted(result.ledgers_deleted) == [1, 2, 3, 4]
    assert result.logs_compacted and result.entries_moved > 0
    await bk.storage.checkpoint()
    after = dir_bytes(ledger_dir)
    print(
        f"ledger dir bytes before GC {before}, after {after}; logs {logs_before} -> "
        f"{len(bk.storage.entry_logger.log_ids())}"
    )
    assert after < before * 0.6, (before, after)
    for lid in (5, 6):
        for eid in range(40):
            assert await client.read_entry(lid, eid) == entry(lid, eid)
    with pytest.raises(NoSuchLedgerError):
        await client.read_entry(1, 0)
    await bk.stop()
    # after a restart the compacted index still finds everything
    store2 = server.session()
    bk2 = Bookie(config, store2, serve=False)
    await bk2.start()
    c2 = bk2.local_client()
    for lid in (5, 6):
        for eid in range(40):
            assert await c2.read_entry(lid, eid) == entry(lid, eid)
    with pytest.raises(NoSuchLedgerError):
        await c2.read_entry(2, 5)
    await bk2.stop()


async def test_disk_threshold_turns_read_only_and_back(tmp_path):
    server = MemoryMetadataServer()
    store = server.session()
    disk = FakeUsageDisk()
    bk = Bookie(
        cfg(tmp_path, disk_usage_threshold=0.95, disk_usage_lwm_threshold=0.90), store, disk=disk, serve=False
    )
    await bk.start()
    client = bk.local_client()
    await wait_for_path(store, f"{AVAILABLE_PATH}/bk")
    await client.add_entry(1, 0, KEY, entry(1, 0))
    disk.used_fraction = 0.97
    assert bk.disk_checker is not None
    assert await bk.disk_checker.check_once() is True
    with pytest.raises(BookieReadOnlyError):
        await client.add_entry(1, 1, KEY, entry(1, 1))
    assert (await client.get_info()).read_only
    await wait_for_path(store, f"{READONLY_PATH}/bk")
    await wait_for_path(store, f"{AVAILABLE_PATH}/bk", present=False)
    assert await client.read_entry(1, 0) == entry(1, 0)  # reads go on
    disk.used_fraction = 0.92  # between the thresholds: stays read-only
    assert await bk.disk_checker.check_once() is True
    disk.used_fraction = 0.50
    assert await bk.disk_checker.check_once() is False
    await wait_for_path(store, f"{AVAILABLE_PATH}/bk")
    await wait_for_path(store, f"{READONLY_PATH}/bk", present=False)
    await client.add_entry(1, 1, KEY, entry(1, 1))
    await bk.stop()
    assert await store.exists(f"{AVAILABLE_PATH}/bk") is None


async def test_enospc_fails_the_add_never_acknowledges_it(tmp_path):
    server = MemoryMetadataServer()
    store = server.session()
    disk = FakeUsageDisk()
    bk = Bookie(cfg(tmp_path), store, disk=disk, serve=False)
    await bk.start()
    client = bk.local_client()
    await client.add_entry(1, 0, KEY, entry(1, 0))
    disk.fail_writes = True
    with pytest.raises(DiskFullError):
        await client.add_entry(1, 1, KEY, entry(1, 1))
    with pytest.raises(NoSuchEntryError):
        await client.read_entry(1, 1)  # a failed add is not visible
    assert bk.storage.read_only  # and the bookie stops taking adds
    with pytest.raises(BookieReadOnlyError):
        await client.add_entry(1, 1, KEY, entry(1, 1))
    disk.fail_writes = False
    await bk.stop()
    bk2 = Bookie(cfg(tmp_path), server.session(), disk=RealDisk(), serve=False)
    await bk2.start()
    c2 = bk2.local_client()
    assert await c2.read_entry(1, 0) == entry(1, 0)
    with pytest.raises(NoSuchEntryError):
        await c2.read_entry(1, 1)
    await bk2.stop()


async def test_cookie_binds_identity_to_directories(tmp_path):
    server = MemoryMetadataServer()
    a = cfg(tmp_path, "bkA")
    bk = Bookie(a, server.session(), serve=False, rng=Rng(1))
    await bk.start()
    cookie = await server.session().get(f"{COOKIES_PATH}/bkA")
    assert cookie is not None and b"instance_id" in cookie.value
    await bk.stop()
    # someone else started on bkA's directories
    b_on_a = BookieConfig.for_data_dir(str(tmp_path / "bkA"), bookie_id="bkB")
    with pytest.raises(CookieMismatchError, match="belongs to bookie bkA"):
        await Bookie(b_on_a, server.session(), serve=False).start()
    # bkA restarts fine on its own directories
    bk = Bookie(a, server.session(), serve=False)
    await bk.start()
    await bk.stop()
    # bkA with a different (empty) ledger directory
    moved = a.with_overrides(ledger_directories=(str(tmp_path / "elsewhere"),))
    with pytest.raises(CookieMismatchError, match="no cookie"):
        await Bookie(moved, server.session(), serve=False).start()
    # bkA's journal wiped
    shutil.rmtree(a.journal_directory)
    with pytest.raises(CookieMismatchError, match="wiped"):
        await Bookie(a, server.session(), serve=False).start()
    # a new metadata store (other cluster) with bkA's directories: refused too
    with pytest.raises(CookieMismatchError):
        await Bookie(a.with_overrides(bookie_id="bkA"), MemoryMetadataServer().session(), serve=False).start()


async def test_registration_survives_session_loss(tmp_path):
    server = MemoryMetadataServer()
    store = server.session()
    bk = Bookie(cfg(tmp_path), store, serve=False)
    await bk.start()
    path = f"{AVAILABLE_PATH}/bk"
    await wait_for_path(store, path)
    server.expire_session(store.session_id)
    observer = server.session()
    await wait_for_path(observer, path)
    stat = await observer.exists(path)
    assert stat is not None and stat.ephemeral
    await bk.stop()
    await wait_for_path(observer, path, present=False)
