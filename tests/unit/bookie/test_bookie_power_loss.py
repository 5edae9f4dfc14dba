"""Power loss, simulated: the storage over a MemoryDisk that drops unsynced bytes (torn) on a crash.

A kill -9 keeps the OS page cache, so it cannot catch an add acknowledged before
its fsync; this can.  Each seed runs several lives of one bookie: concurrent adds
on several ledgers, random checkpoints, a fence, deletion of an older ledger with
compaction, then a crash at a random point;
after every restart all acknowledged adds read back bit-for-bit, the LAC did not
go backwards and an acknowledged fence still holds.
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.bookie.api import BookieError, LedgerFencedError, NoSuchLedgerError
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.gc import GarbageCollector
from magnetar.bookie.index import MemoryIndexStore
from magnetar.bookie.memory_disk import InlineExecutor, MemoryDisk
from magnetar.bookie.storage import LedgerStorage
from magnetar.runtime import Rng

KEY = b"pl"


def make_storage(
    disk: MemoryDisk, index: MemoryIndexStore, rng: Rng, dirs: tuple[str, ...] = ("/bk/ledgers",)
) -> LedgerStorage:
    cfg = BookieConfig.for_data_dir(
        "/bk",
        ledger_directories=dirs,
        journal_max_group_wait_ms=0,
        journal_max_size_mb=rng.choice([0, 1]),  # 0: a new journal file for every group
        entry_log_size_limit_bytes=rng.choice([4096, 65536]),
        flush_interval_ms=3_600_000,
        write_cache_max_size_mb=1,
    )
    return LedgerStorage(
        cfg, disk=disk, index_factory=lambda _path: index, executor_factory=InlineExecutor, bookie_id="sim"
    )


async def one_life(s: LedgerStorage, rng: Rng, state: dict, life: int) -> None:
    acked: dict[tuple[int, int], bytes] = state["acked"]
    stop = asyncio.Event()
    ledgers = [life * 10 + 1, life * 10 + 2, life * 10 + 3]  # older lives' ledgers are quiescent

    async def writer(lid: int) -> None:
        while not stop.is_set():
            if lid in state["fenced"]:
                return
            eid = state["next"].get(lid, 0)
            state["next"][lid] = eid + 1
            data = encode_entry(lid, eid, eid - 1, 0, rng.randbytes(rng.randint(1, 1500)))
            try:
                await s.add_entry(lid, eid, KEY, data)
            except BookieError:
                return
            acked[(lid, eid)] = data
            state["acks"] += 1
            state["lac"][lid] = max(state["lac"].get(lid, -1), eid - 1)

    async def checkpointer() -> None:
        while not stop.is_set():
            for _ in range(rng.randint(1, 40)):
                await asyncio.sleep(0)
            try:
                await s.checkpoint()
            except (BookieError, OSError):
                return

    async def fencer(lid: int) -> None:
        for _ in range(rng.randint(1, 200)):
            await asyncio.sleep(0)
        try:
            await s.fence(lid, KEY)
        except BookieError:
            return
        state["fenced"].add(lid)

    async def collector() -> None:
        """Delete an older ledger (its metadata is gone) and compact, racing the adds."""
        older = sorted({lid for lid, _ in acked if lid not in ledgers and lid not in state["deleted"]})
        if not older:
            return
        victim = rng.choice(older)
        for _ in range(rng.randint(1, 100)):
            await asyncio.sleep(0)
        try:
            await s.delete_ledger(victim)
        except (BookieError, OSError):
            return
        state["deleted"].add(victim)
        for key in [k for k in acked if k[0] == victim]:
            del acked[key]
        try:
            await GarbageCollector(s, None, s.config, s.clock).compact(0.9)  # type: ignore[arg-type]
        except (BookieError, OSError):
            return

    tasks = [asyncio.ensure_future(writer(lid)) for lid in ledgers for _ in range(3)]
    tasks.append(asyncio.ensure_future(checkpointer()))
    tasks.append(asyncio.ensure_future(collector()))
    if rng.chance(0.5):
        tasks.append(asyncio.ensure_future(fencer(rng.choice(ledgers))))
    for _ in range(rng.randint(0, 400)):
        await asyncio.sleep(0)
    # --- power loss: nothing of this life runs another step ---
    s.disk.crash(rng)  # type: ignore[attr-defined]
    stop.set()
    for t in tasks:
        t.cancel()
    await s.supervisor.aclose()
    await asyncio.gather(*tasks, return_exceptions=True)


async def verify(s: LedgerStorage, state: dict) -> None:
    for (lid, eid), data in sorted(state["acked"].items()):
        got = await s.read_entry(lid, eid)
        assert got == data, f"acknowledged entry {lid}:{eid} lost or changed"
    for lid, lac in state["lac"].items():
        if lid in state["deleted"]:
            continue
        assert await s.read_lac(lid) >= lac, f"LAC of ledger {lid} went backwards"
    for lid in state["deleted"]:
        with pytest.raises(NoSuchLedgerError):
            await s.read_entry(lid, 0)
    for lid in state["fenced"] - state["deleted"]:
        assert s.ledgers[lid].fenced, f"acknowledged fence of ledger {lid} lost"
        if not s.read_only:
            eid = state["next"].get(lid, 0) + 1000
            with pytest.raises(LedgerFencedError):
                await s.add_entry(lid, eid, KEY, encode_entry(lid, eid, -1, 0, b"late"))


@pytest.mark.parametrize("seed", range(25))
async def test_power_loss_never_loses_an_acknowledged_add(seed):
    rng = Rng(seed)
    # every third seed runs on a small disk that fills up: adds fail, never half-acknowledged
    disk = MemoryDisk(capacity_bytes=rng.randint(60_000, 400_000) if seed % 3 == 2 else 1 << 40)
    index = MemoryIndexStore()
    state: dict = {"acked": {}, "next": {}, "lac": {}, "fenced": set(), "deleted": set(), "acks": 0}
    dirs = ("/bk/ledgers", "/bk/ledgers2") if seed % 2 else ("/bk/ledgers",)  # ledgerDirectories
    for life in range(5):
        s = make_storage(disk, index, rng, dirs)
        await s.open()
        await verify(s, state)
        await one_life(s, rng, state, life)
    s = make_storage(disk, index, rng, dirs)
    await s.open()
    try:
        await verify(s, state)
        assert state["acks"] > 0
    finally:
        await s.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(25, 400))
async def test_power_loss_many_seeds(seed):
    await test_power_loss_never_loses_an_acknowledged_add(seed)
