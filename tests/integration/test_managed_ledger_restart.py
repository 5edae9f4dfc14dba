"""Restart after kill -9: a writer process over the real storage stack (RocksDB metadata, the
bookie's journal and ledger storage, the real ledger client) writes N entries, acknowledges a
scattered half individually plus some batch indexes, waits until the cursor state is durable
(``cursor.flush()``), says READY and is killed with SIGKILL.  This process then reopens the same
data directory and checks that the backlog, the mark-delete position, every hole and every ack
set are exactly as acknowledged.

The persisted-range cap is raised to 100,000 here so that every one of the ~N/4 ranges of a
random half is kept; past the cap (default 10,000) later ranges would be redelivered (see
tests/unit/managed_ledger/test_cursor_state.py).

Run as a script (``python this_file writer DATA_DIR N OUT_JSON``) it is the writer.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
from magnetar.runtime import RealClock, Rng

NAME = "public/default/persistent/restart"
CONFIG = ManagedLedgerConfig(
    max_entries_per_ledger=20_000,
    min_ledger_rollover_time_ms=0,
    max_unacked_ranges_to_persist=100_000,
)
READY_TIMEOUT_S = 300.0


async def open_stack(data_dir: str):
    from magnetar.bookie.api import AVAILABLE_PATH
    from magnetar.bookie.config import BookieConfig
    from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
    from magnetar.bookie.storage import LedgerStorage
    from magnetar.bookkeeper.client import BookKeeperClient
    from magnetar.metadata.factory import create_metadata_store

    clock = RealClock()
    store = await create_metadata_store(f"rocksdb:{data_dir}/metadata", clock=clock)
    storage = LedgerStorage(
        BookieConfig.for_data_dir(f"{data_dir}/bookie", journal_sync_data=False, bookie_id="127.0.0.1:3181"),
        clock=clock,
    )
    await storage.open()
    pool = LocalBookieClientPool(LocalBookieClient(storage))
    await store.put(f"{AVAILABLE_PATH}/{storage.bookie_id}", b"", ephemeral=True)
    bk = BookKeeperClient(store, pool, clock, Rng(7))
    factory = ManagedLedgerFactoryImpl(store, bk, clock, CONFIG, check_interval_s=0)

    async def close() -> None:
        await factory.aclose()
        await bk.aclose()
        await pool.aclose()
        await storage.aclose()
        await store.aclose()

    return factory, close


async def writer(data_dir: str, n: int, out_json: str) -> None:
    factory, _close = await open_stack(data_dir)
    ml = await factory.open(NAME)
    cursor = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    positions: list[Position] = []
    for start in range(0, n, 2000):
        positions += await asyncio.gather(
            *(ml.add_entry(b"m-%07d" % i) for i in range(start, min(n, start + 2000)))
        )
    rng = random.Random(20261130)
    acked = sorted(rng.sample(range(n), n // 2))
    acked_set = set(acked)
    for i in range(0, len(acked), 5000):
        await cursor.delete([positions[j] for j in acked[i : i + 5000]])
    unacked = [i for i in range(n) if i not in acked_set]
    batch = {}
    for i in rng.sample(unacked[len(unacked) // 10 :], 300):
        words = [rng.getrandbits(64) | 1, rng.getrandbits(64)]
        await cursor.ack_batch_indexes(positions[i], words)
        batch[i] = cursor.get_ack_set(positions[i])
    await cursor.flush()
    expected = {
        "positions": [[p.ledger_id, p.entry_id] for p in positions],
        "acked": acked,
        "batch": {str(k): v for k, v in batch.items()},
        "mark_delete": [cursor.mark_delete_position.ledger_id, cursor.mark_delete_position.entry_id],
        "ranges": [
            [a.ledger_id, a.entry_id, b.ledger_id, b.entry_id]
            for a, b in cursor.individually_deleted_ranges()
        ],
        "backlog": cursor.number_of_entries_in_backlog(),
    }
    await asyncio.to_thread(Path(out_json).write_text, json.dumps(expected))
    print("READY", flush=True)
    await asyncio.sleep(3600)  # killed with SIGKILL by the test


def _run_writer_and_kill(data_dir: Path, n: int) -> dict:
    out = data_dir / "expected.json"
    proc = subprocess.Popen(
        [sys.executable, __file__, "writer", str(data_dir), str(n), str(out)],
        stdout=subprocess.PIPE,
        stderr=open(data_dir / "writer.log", "wb"),  # noqa: SIM115 - the child owns it
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        line = b""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if line.strip() == b"READY" or not line:
                break
        assert line.strip() == b"READY", (data_dir / "writer.log").read_text()[-3000:]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    return json.loads(out.read_text())


async def _verify(data_dir: Path, expected: dict) -> None:
    factory, close = await open_stack(str(data_dir))
    try:
        ml = await factory.open(NAME)
        positions = [Position(*p) for p in expected["positions"]]
        assert ml.number_of_entries == len(positions)
        cursor = ml.cursors["sub"]
        assert cursor.mark_delete_position == Position(*expected["mark_delete"])
        ranges = [
            [a.ledger_id, a.entry_id, b.ledger_id, b.entry_id]
            for a, b in cursor.individually_deleted_ranges()
        ]
        assert ranges == expected["ranges"]
        assert cursor.number_of_entries_in_backlog() == expected["backlog"]
        acked = set(expected["acked"])
        for i, p in enumerate(positions):
            assert cursor.is_acknowledged(p) == (i in acked), (i, p)
        for k, words in expected["batch"].items():
            assert cursor.get_ack_set(positions[int(k)]) == words
        got = []
        while batch := await cursor.read_entries(5000):
            got += batch
        want = [i for i in range(len(positions)) if i not in acked]
        assert [e.position for e in got] == [positions[i] for i in want], (
            "no acked entry comes back, none lost"
        )
        assert [e.data for e in got[:3]] == [b"m-%07d" % i for i in want[:3]]
    finally:
        await close()


@pytest.mark.parametrize(
    "n", [pytest.param(20_000, id="20k"), pytest.param(100_000, id="100k", marks=pytest.mark.slow)]
)
async def test_restart_after_kill9_restores_acks_exactly(tmp_path, n) -> None:
    expected = await asyncio.to_thread(_run_writer_and_kill, tmp_path, n)
    assert expected["backlog"] == n - n // 2
    await _verify(tmp_path, expected)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "writer":
    asyncio.run(writer(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
