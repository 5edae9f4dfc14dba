"""A broker killed with SIGKILL in the middle of compaction phase two, over the real storage stack
(RocksDB metadata, the bookie's journal and ledger storage, the real ledger client).

The child process (this file run as a script) writes 10,000 updates over 100 keys, compacts
(horizon 1), writes 3,000 more, starts a second compaction whose compacted-ledger adds stop
after 20 entries (a test-side BookKeeper wrapper parks them), says MIDWAY with what it knows,
and is killed.  This process reopens the same data directory and checks that horizon 1 and its
compacted ledger are intact and served (one latest value per key as of horizon 1, then the
live messages), that the interrupted run left its ledger recorded as pending, and that a new
compaction deletes that orphan, succeeds, and serves the latest value of every key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "compaction"))

from compaction_helpers import Workload, read_view  # noqa: E402

from magnetar.broker.compaction import (  # noqa: E402
    COMPACTION_SUBSCRIPTION,
    CompactedTopicReader,
    Compactor,
    read_horizon,
)
from magnetar.broker.compaction.compactor import PENDING_LEDGER_PROPERTY  # noqa: E402
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position  # noqa: E402
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl  # noqa: E402
from magnetar.runtime import RealClock, Rng  # noqa: E402

NAME = "public/default/persistent/compaction-kill9"
CONFIG = ManagedLedgerConfig(max_entries_per_ledger=500, min_ledger_rollover_time_ms=0)
READY_TIMEOUT_S = 240.0


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

    return factory, bk, clock, close


class _ParkingHandle:
    """A write handle whose adds park forever after ``limit`` of them (the crash point)."""

    def __init__(self, inner, limit: int, midway) -> None:  # noqa: ANN001
        self._inner, self._limit, self._midway = inner, limit, midway

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self._inner, name)

    async def add_entry(self, data: bytes) -> int:
        if self._limit <= 0:
            self._midway()
            await asyncio.sleep(3600)
        self._limit -= 1
        return await self._inner.add_entry(data)


class _ParkingBookKeeper:
    def __init__(self, inner, limit: int, midway) -> None:  # noqa: ANN001
        self._inner, self._limit, self._midway = inner, limit, midway

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self._inner, name)

    async def create_ledger(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        return _ParkingHandle(await self._inner.create_ledger(*args, **kwargs), self._limit, self._midway)


async def child(data_dir: str, out_json: str) -> None:
    factory, bk, clock, _close = await open_stack(data_dir)
    ml = await factory.open(NAME)
    w = Workload(seed=31)
    await w.append(ml, 10_000)
    first = await Compactor(bk, clock).compact(ml)
    model_1 = dict(w.model)
    await w.append(ml, 3_000)
    said = False

    def midway() -> None:
        nonlocal said
        if said:
            return
        said = True
        cursor = ml.cursors[COMPACTION_SUBSCRIPTION]
        Path(out_json).write_text(
            json.dumps(
                {
                    "horizon": [first.horizon.position.ledger_id, first.horizon.position.entry_id],
                    "ledger": first.horizon.ledger_id,
                    "pending": cursor.properties.get(PENDING_LEDGER_PROPERTY),
                    "model_1": {k: v.decode() for k, v in model_1.items()},
                    "model_2": {k: v.decode() for k, v in w.model.items()},
                }
            )
        )
        print("MIDWAY", flush=True)

    await Compactor(_ParkingBookKeeper(bk, 20, midway), clock).compact(ml)  # type: ignore[arg-type]
    await asyncio.sleep(3600)


def _run_child_and_kill(data_dir: Path) -> dict:
    out = data_dir / "state.json"
    proc = subprocess.Popen(
        [sys.executable, __file__, "child", str(data_dir), str(out)],
        stdout=subprocess.PIPE,
        stderr=open(data_dir / "child.log", "wb"),  # noqa: SIM115 - the child owns it
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        line = b""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if line.strip() == b"MIDWAY" or not line:
                break
        assert line.strip() == b"MIDWAY", (data_dir / "child.log").read_text()[-3000:]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    return json.loads(out.read_text())


async def _view(ml, bk, name: str) -> list[tuple]:
    cursor = await ml.open_cursor(name, InitialPosition.EARLIEST)
    reader = CompactedTopicReader(ml, cursor, bk, start=Position.EARLIEST)
    try:
        return await read_view(reader)
    finally:
        await reader.close()


async def test_kill9_mid_phase_two_keeps_the_old_horizon_and_rerun_succeeds(tmp_path) -> None:
    state = await asyncio.to_thread(_run_child_and_kill, tmp_path)
    assert state["pending"] is not None and state["pending"] != state["ledger"]
    factory, bk, clock, close = await open_stack(str(tmp_path))
    try:
        ml = await factory.open(NAME)
        horizon = read_horizon(ml)
        assert horizon is not None
        assert (horizon.position.ledger_id, horizon.position.entry_id) == tuple(state["horizon"])
        assert horizon.ledger_id == state["ledger"]
        view = await _view(ml, bk, "after-crash")
        compacted = [row for row in view if row[0] <= horizon.position]
        assert len({k for _p, k, _v, _n in compacted}) == len(compacted)
        assert {k: v.decode() for _p, k, v, _n in compacted} == state["model_1"]
        assert len(view) - len(compacted) > 2_000, "then the live messages after the horizon"

        assert state["pending"] in await bk.list_ledgers()
        result = await Compactor(bk, clock).compact(ml)
        assert state["pending"] in result.deleted_ledgers and state["ledger"] in result.deleted_ledgers
        assert state["pending"] not in await bk.list_ledgers()
        final = await _view(ml, bk, "after-rerun")
        assert {k: v.decode() for _p, k, v, _n in final} == state["model_2"]
        assert len(final) == len(state["model_2"])
    finally:
        await close()


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "child":
    asyncio.run(child(sys.argv[2], sys.argv[3]))
