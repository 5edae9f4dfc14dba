"""Tiered storage drivers (filesystem, aws-s3 against a real moto S3 server) and the managed
ledger's offload process over the in-memory BookKeeper."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from magnetar.bookkeeper.api import NoSuchEntryError
from magnetar.managed_ledger.api import InitialPosition, Position
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
from magnetar.managed_ledger.offload import OffloadError, OffloadNotFoundError, OffloadPolicies, policies_from
from magnetar.managed_ledger.offload_blob import BlobStoreOffloader, OffloaderRegistry
from magnetar.managed_ledger.offload_format import CorruptObjectError, object_names
from magnetar.managed_ledger.offload_process import OffloadStatus
from magnetar.managed_ledger.offload_process import schedule as schedule_offload
from magnetar.testing.ml_conformance import small_config
from magnetar.testing.moto_s3 import MotoS3Server, free_port


@pytest.fixture(scope="module")
def moto():
    with MotoS3Server("tier-unit") as m:
        yield m


def fs_policies(tmp_path: Path, **kw) -> OffloadPolicies:
    return OffloadPolicies(driver="filesystem", file_system_uri=str(tmp_path / "tier"), **kw)


def s3_policies(m: MotoS3Server, **kw) -> OffloadPolicies:
    return replace(policies_from(m.properties()), **kw)


async def _closed_ledger(harness, n: int, size: int = 100):
    h = await harness.bk.create_ledger(1, 1, 1, password=b"")
    for i in range(n):
        await h.add_entry(b"%06d" % i + b"x" * (size - 6))
    await h.close()
    return await harness.bk.open_ledger(h.ledger_id, password=b"", recovery=False)


async def _roundtrip(harness, off: BlobStoreOffloader) -> None:
    rh = await _closed_ledger(harness, 500, 1000)
    await off.offload(rh, "u1", {"ManagedLedgerName": "t/ns/d/x"})
    h = await off.read_offloaded(rh.ledger_id, "u1", off.driver_metadata())
    assert h.last_add_confirmed == 499 and h.length == rh.length
    # A few entries: only the block(s) holding them (blocks of ~4 KiB = 4 entries).
    got = await h.read(250, 251)
    assert [e.data[:6] for e in got] == [b"000250", b"000251"]
    assert h.range_gets == 1 and h.blocks_fetched == 1
    # Sequential reads fetch ahead: 100 entries in a few ranged GETs, not one per block.
    gets = h.range_gets
    for first in range(252, 352, 10):
        got = await h.read(first, first + 9)
        assert [int(e.data[:6]) for e in got] == list(range(first, first + 10))
    assert h.range_gets - gets <= 6
    assert [e.entry_id for e in await h.read(0, 499)] == list(range(500))
    with pytest.raises(NoSuchEntryError):
        await h.read(499, 500)
    await h.close()
    await off.delete_offloaded(rh.ledger_id, "u1", off.driver_metadata())
    with pytest.raises(OffloadNotFoundError):
        await off.read_offloaded(rh.ledger_id, "u1", off.driver_metadata())
    await off.delete_offloaded(rh.ledger_id, "u1", off.driver_metadata())  # missing is fine


async def test_filesystem_driver_roundtrip_reads_only_needed_blocks(harness, tmp_path) -> None:
    off = BlobStoreOffloader(fs_policies(tmp_path, read_buffer_size_bytes=4096))
    try:
        await _roundtrip(harness, off)
    finally:
        await off.aclose()


async def test_s3_driver_roundtrip_against_moto(harness, moto) -> None:
    off = BlobStoreOffloader(s3_policies(moto, read_buffer_size_bytes=4096, max_block_size_bytes=1))
    try:
        await _roundtrip(harness, off)
        assert not [k for k in moto.object_keys() if k.startswith("u1-")]
    finally:
        await off.aclose()


async def test_corrupt_or_missing_objects_are_clear_errors(harness, tmp_path) -> None:
    off = BlobStoreOffloader(fs_policies(tmp_path, read_buffer_size_bytes=4096))
    try:
        rh = await _closed_ledger(harness, 100, 1000)
        await off.offload(rh, "u2", {})
        data, index = (tmp_path / "tier" / n for n in object_names("u2", rh.ledger_id))
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF  # one flipped bit in the middle of a block
        data.write_bytes(bytes(raw))
        h = await off.read_offloaded(rh.ledger_id, "u2")
        with pytest.raises(CorruptObjectError, match="checksum mismatch"):
            await h.read(0, 99)
        data.write_bytes(bytes(raw[:-10]))  # truncated
        with pytest.raises(CorruptObjectError, match="its index says"):
            await off.read_offloaded(rh.ledger_id, "u2")
        iraw = bytearray(index.read_bytes())
        iraw[20] ^= 1
        index.write_bytes(bytes(iraw))
        with pytest.raises(CorruptObjectError, match="index object checksum"):
            await off.read_offloaded(rh.ledger_id, "u2")
        index.unlink()
        with pytest.raises(OffloadNotFoundError, match="missing"):
            await off.read_offloaded(rh.ledger_id, "u2")
    finally:
        await off.aclose()


async def test_wrong_credentials_and_unreachable_store_fail_clearly(harness, tmp_path) -> None:
    rh = await _closed_ledger(harness, 10)
    with MotoS3Server("tier-auth", auth=True) as m:
        bad = BlobStoreOffloader(s3_policies(m, credential_id="AKIAWRONGWRONGWRONG1", credential_secret="x"))
        try:
            with pytest.raises(OffloadError, match="access denied"):
                await bad.offload(rh, "u3", {})
        finally:
            await bad.aclose()
        good = BlobStoreOffloader(s3_policies(m))
        try:
            await good.offload(rh, "u3", {})
            assert sorted(m.object_keys()) == sorted(object_names("u3", rh.ledger_id))
        finally:
            await good.aclose()
    dead = BlobStoreOffloader(
        OffloadPolicies(driver="aws-s3", bucket="b", service_endpoint=f"http://127.0.0.1:{free_port()}")
    )
    try:
        with pytest.raises(OffloadError, match="failed"):
            await asyncio.wait_for(dead.offload(rh, "u4", {}), 120)
    finally:
        await dead.aclose()


def test_policies_from_pulsar_keys_and_checks() -> None:
    p = policies_from(
        {
            "managedLedgerOffloadDriver": "S3",
            "s3ManagedLedgerOffloadBucket": "b",
            "managedLedgerOffloadMaxBlockSizeInBytes": "1048576",
            "managedLedgerOffloadThresholdInBytes": 0,
        }
    )
    assert (p.driver, p.bucket, p.max_block_size_bytes, p.threshold_bytes) == ("S3", "b", 1048576, 0)
    p.check()
    with pytest.raises(OffloadError, match="unsupported offload driver"):
        OffloadPolicies(driver="azureblob").check()
    with pytest.raises(OffloadError, match="Bucket is required"):
        OffloadPolicies(driver="aws-s3").check()
    with pytest.raises(OffloadError, match="fileSystemURI"):
        OffloadPolicies(driver="filesystem").check()


# -- the managed ledger's offload process ------------------------------------------------------


async def _factory(harness, registry, **policy) -> ManagedLedgerFactoryImpl:
    return ManagedLedgerFactoryImpl(
        harness.server.session(),
        harness.bk,
        harness.clock,
        small_config(offload_policies=registry.defaults if not policy else policy["p"]),
        offloaders=registry,
        check_interval_s=0,
    )


async def _until(pred, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s * 20)):
        if pred():
            return
        await asyncio.sleep(0.05)
    assert pred()


async def _wait_status(ml, timeout_s: float = 30.0) -> None:
    for _ in range(int(timeout_s * 20)):
        if ml.offload_state.task is None and ml.offload_state.status is not OffloadStatus.NOT_RUN:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"offload still {ml.offload_state.status}")


async def test_auto_offload_deletion_lag_reads_and_cleanup(harness, tmp_path) -> None:
    pol = fs_policies(tmp_path, threshold_bytes=0, deletion_lag_ms=0, read_buffer_size_bytes=256)
    registry = OffloaderRegistry(pol)
    f = await _factory(harness, registry)
    try:
        ml = await f.open("t/ns/d/auto")
        c = await ml.open_cursor("s", InitialPosition.EARLIEST)
        pos = [await ml.add_entry(b"m%03d" % i) for i in range(35)]  # 10 a ledger: 3 roll over
        for _ in range(200):
            infos = ml.ledgers()
            done = [i for i in infos[:-1] if i.offload_context and i.offload_context.bookkeeper_deleted]
            if len(done) == 3 and ml.offload_state.task is None:
                break
            await asyncio.sleep(0.05)
        infos = ml.ledgers()
        assert [i.offloaded for i in infos] == [True, True, True, False], ml.offload_state
        offloaded_ids = [i.ledger_id for i in infos[:3]]
        assert not set(offloaded_ids) & set(harness.bk.ledger_ids())  # gone from the bookies
        stats = ml.internal_stats()["ledgers"]
        assert stats[0]["offloaded"] and stats[0]["offloadContext"]["complete"]
        assert stats[0]["offloadContext"]["driverMetadata"]["name"] == "filesystem"
        # Cursors read through the tier with the same positions; a seek into the middle too.
        got = await c.read_entries(35)
        assert [(e.position, e.data) for e in got] == [(p, b"m%03d" % i) for i, p in enumerate(pos)]
        r = await ml.new_non_durable_cursor(pos[14])
        got = await r.read_entries(5)
        assert [e.position for e in got] == pos[15:20]
        # A new owner reads the offloaded ledgers from the recorded offload context.
        await f.aclose()
        f = await _factory(harness, OffloaderRegistry(pol))
        ml = await f.open("t/ns/d/auto")
        assert (await ml.read_entry(pos[5])).data == b"m005"
        # Retention trims offloaded ledgers: their objects go too.
        tier = tmp_path / "tier"
        assert len(list(tier.iterdir())) == 6
        await ml.cursors["s"].mark_delete(pos[25])
        await ml.trim_consumed_ledgers()
        await _until(lambda: len(list(tier.iterdir())) == 2)  # the background trim may be the one
        # Deleting the managed ledger deletes the rest.
        await ml.delete()
        assert list(tier.iterdir()) == []
    finally:
        await f.aclose()


async def test_unreachable_store_fails_keeps_bookies_and_retries(harness, tmp_path) -> None:
    with MotoS3Server("tier-retry") as m:
        pol = s3_policies(m, threshold_bytes=-1, deletion_lag_ms=0)
        endpoint_port = m.port
        registry = OffloaderRegistry(pol)
        f = await _factory(harness, registry)
        try:
            ml = await f.open("t/ns/d/retry")
            pos = [await ml.add_entry(b"r%03d" % i) for i in range(25)]
            m.stop()  # the object store goes away
            ml.trigger_offload(Position(ml.ledger_list.current_id, 0))
            await _wait_status(ml, 120)
            st = ml.offload_state.to_json()
            assert st["status"] == "ERROR" and "failed" in st["lastError"], st
            first = ml.ledgers()[0]
            assert not first.offloaded and first.offload_context is not None  # attempt recorded
            assert first.ledger_id in harness.bk.ledger_ids()  # nothing deleted from the bookies
            assert (await ml.read_entry(pos[3])).data == b"r003"
            # The store is back (same port): a retry completes and cleans up.
            new = replace(pol, threshold_bytes=0)  # retention keeps the (cursor-less) ledgers
            await ml.set_config(
                replace(ml.config, retention_time_ms=-1, retention_size_bytes=-1, offload_policies=new)
            )
            schedule_offload(ml)
            assert ml.offload_state.task is None  # backing off after the failure
            m2 = MotoS3Server("tier-retry")
            m2.port, m2.endpoint = endpoint_port, m.endpoint
            with m2:
                # The automatic path retries: a 0 threshold, and the periodic check (the
                # factory's, called here) runs again once the failure's backoff has passed.
                await asyncio.sleep(
                    max(0.0, ml.offload_state.retry_at_mono - harness.clock.monotonic()) + 0.05
                )
                schedule_offload(ml)
                assert ml.offload_state.task is not None
                await _wait_status(ml, 120)
                assert ml.offload_state.status is OffloadStatus.SUCCESS, ml.offload_state.last_error
                assert [i.offloaded for i in ml.ledgers()] == [True, True, False]
                assert first.ledger_id not in harness.bk.ledger_ids()
                assert (await ml.read_entry(pos[3])).data == b"r003"
                keys = m2.object_keys()
                assert len(keys) == 4 and all(
                    k.startswith(tuple(i.offload_context.uid for i in ml.ledgers()[:2])) for k in keys
                )
        finally:
            await f.aclose()
