"""The standalone's bookie gives disk space back: deleted topics and trimmed ledgers leave the disk.

A real ``magnetar standalone`` subprocess runs with a small GC interval
(``gcWaitTime``), compaction due at every GC round
(``minor/majorCompactionInterval``), small entry logs (``logSizeLimit``) and
journal files (``journalMaxSizeMB``) and ledgers that roll over every 40 entries
(``managedLedgerMaxEntriesPerLedger``), so tens of MB produced with the official
client spread over many ledgers and entry logs.  The data directory's
allocated size is measured (blocks, as ``du`` counts them):

* delete the topics -> within one GC interval (plus the round's own time) the
  directory is back near its starting size;
* separately, consume and acknowledge everything with retention off -> the
  consumed ledgers are trimmed, and again the space returns.

After the run the standalone is stopped and its metadata and bookie index are
opened offline: none of the ledgers the topics had is left, neither as
ledger metadata nor in the bookie's storage (the managed ledger deleted the
metadata; the bookie's GC saw it gone and dropped the ledger).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.skipif(broker_unavailable_reason() is not None, reason="no broker")

GC_WAIT_S = 3
MESSAGE = 32 * 1024
MESSAGES_PER_TOPIC = 300  # ~9.4 MB per topic
TOPICS = 3
# What may stay after everything is deleted: the active entry log (< logSizeLimit), the open
# journal file (< journalMaxSizeMB), RocksDB files of metadata and index, the current ledgers.
SLACK_BYTES = 6 * 1024 * 1024

CONFIG = f"""
gcWaitTime={GC_WAIT_S * 1000}
minorCompactionInterval=1
majorCompactionInterval=1
flushInterval=500
logSizeLimit={2 * 1024 * 1024}
journalMaxSizeMB=2
journalPreAllocSizeMB=1
managedLedgerMaxEntriesPerLedger=40
managedLedgerMinLedgerRolloverTimeMinutes=0
brokerDeleteInactiveTopicsEnabled=false
defaultRetentionTimeInMinutes=0
defaultRetentionSizeInMB=0
"""


def du(path: Path) -> int:
    """Allocated bytes under ``path`` (st_blocks, so preallocated but unwritten room counts)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass  # a file deleted while we walk (compaction, journal rotation)
    return total


def wait_for_size(path: Path, limit: int, timeout_s: float) -> tuple[int, float]:
    t0 = time.monotonic()
    size = du(path)
    while size > limit and time.monotonic() - t0 < timeout_s:
        time.sleep(0.25)
        size = du(path)
    return size, time.monotonic() - t0


def admin(web_url: str, method: str, path: str) -> object:
    req = urllib.request.Request(f"{web_url}{path}", method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def ledger_ids(web_url: str, topic: str) -> set[int]:
    stats = admin(web_url, "GET", f"/admin/v2/persistent/public/default/{topic}/internalStats")
    assert isinstance(stats, dict)
    ids = {int(info["ledgerId"]) for info in stats["ledgers"]}
    for cursor in stats.get("cursors", {}).values():
        if int(cursor.get("cursorLedger", -1)) >= 0:
            ids.add(int(cursor["cursorLedger"]))
    return ids


def produce(client, topic: str, payload: bytes) -> None:  # type: ignore[no-untyped-def]
    producer = client.create_producer(
        f"persistent://public/default/{topic}",
        batching_enabled=False,
        max_pending_messages=200,
        block_if_queue_full=True,
    )
    for _ in range(MESSAGES_PER_TOPIC):
        producer.send_async(payload, None)
    producer.flush()
    producer.close()


@pytest.fixture
def standalone(tmp_path):  # type: ignore[no-untyped-def]
    conf = tmp_path / "standalone.conf"
    conf.write_text(CONFIG)
    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    proc.start(timeout_s=60)
    yield proc
    proc.terminate()


def test_deleted_and_trimmed_topics_leave_the_disk(standalone, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = standalone.data_dir
    time.sleep(1.0)  # let start-up writes (cluster/tenant/namespace metadata) settle
    start = du(data)
    payload = os.urandom(MESSAGE)
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=30)
    run = uuid.uuid4().hex[:6]
    try:
        # --- 1. produce, then delete the topics
        names = [f"gc-del-{run}-{i}" for i in range(TOPICS)]
        for name in names:
            produce(client, name, payload)
        gone: set[int] = set()
        for name in names:
            gone |= ledger_ids(standalone.web_url, name)
        full, _ = wait_for_size(data, 0, 1.0)  # a second for the checkpoint to write entry logs
        produced = TOPICS * MESSAGES_PER_TOPIC * MESSAGE
        assert full - start > produced * 0.5, (start, full)  # (some may still be in the write cache)
        assert len(gone) >= TOPICS * 5, gone  # many ledgers, rolled over every 40 entries
        for name in names:
            admin(standalone.web_url, "DELETE", f"/admin/v2/persistent/public/default/{name}?force=true")
        after_delete, took = wait_for_size(data, start + SLACK_BYTES, GC_WAIT_S + 4)
        print(
            f"gc: start {start >> 10} KiB, full {full >> 10} KiB, {after_delete >> 10} KiB {took:.1f} s after delete"
        )
        assert after_delete <= start + SLACK_BYTES, (
            f"after deleting {produced >> 20} MB of topics the data dir is still {after_delete >> 20} MB "
            f"(started at {start >> 20} MB) {took:.1f} s later; log:\n{standalone.log_tail()}"
        )

        # --- 2. retention trims what a subscription consumed
        base = du(data)
        topic = f"gc-trim-{run}"
        consumer = client.subscribe(f"persistent://public/default/{topic}", "sub")
        produce(client, topic, payload)
        trimmed = ledger_ids(standalone.web_url, topic)
        full2 = du(data)  # before consuming: trimming starts with the first acknowledgements
        for _ in range(MESSAGES_PER_TOPIC):
            consumer.acknowledge(consumer.receive(timeout_millis=20_000))
        assert full2 - base > MESSAGES_PER_TOPIC * MESSAGE * 0.5, (base, full2)
        deadline = time.monotonic() + 20
        while len(ledger_ids(standalone.web_url, topic) & trimmed) > 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the managed ledger trims the consumed ledgers (deletes their metadata)
        after_trim, took = wait_for_size(data, base + SLACK_BYTES, GC_WAIT_S + 8)
        print(
            f"trim: base {base >> 10} KiB, full {full2 >> 10} KiB, {after_trim >> 10} KiB {took:.1f} s after acks"
        )
        assert after_trim <= base + SLACK_BYTES, (
            f"after consuming {MESSAGES_PER_TOPIC * MESSAGE >> 20} MB the data dir is {after_trim >> 20} MB "
            f"(was {base >> 20} MB) {took:.1f} s later; log:\n{standalone.log_tail()}"
        )
        still = ledger_ids(standalone.web_url, topic)
        trimmed -= still
        assert len(trimmed) >= 5, (trimmed, still)
        consumer.close()
    finally:
        client.close()
    assert standalone.terminate() == 0, standalone.log_tail()
    leftovers = asyncio.run(_ledgers_left(data, gone | trimmed))
    assert leftovers == {"metadata": [], "bookie": []}


async def _ledgers_left(data: Path, ledgers: set[int]) -> dict[str, list[int]]:
    """Offline look at the stopped standalone: which of ``ledgers`` still exist anywhere."""
    from magnetar.bookie.api import ledger_path
    from magnetar.bookie.config import BookieConfig
    from magnetar.bookie.storage import LedgerStorage
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await create_metadata_store(f"rocksdb:{data / 'metadata'}", clock=RealClock())
    try:
        in_metadata = sorted([lid for lid in ledgers if await store.exists(ledger_path(lid)) is not None])
    finally:
        await store.aclose()
    storage = LedgerStorage(BookieConfig.for_data_dir(str(data / "bookie")), clock=RealClock())
    await storage.open()
    try:
        in_bookie = sorted(set(storage.ledger_ids()) & ledgers)
    finally:
        await storage.aclose()
    return {"metadata": in_metadata, "bookie": in_bookie}
