"""Topic compaction speed: messages/s through the two-phase compactor, and compacted-view reads.

For each stack -- the in-memory BookKeeper and the real ledger client over an in-process
bookie (journal fsync off, as standalone) -- it writes --messages updates over --keys keys
(5% deletes; --batched of them in batches of up to 20 records; every codec), then times:

    compact:   one full compaction (phase one + phase two + horizon), in topic messages/s
               (and the entries written to the compacted ledger)
    recompact: a second compaction after --messages/10 more updates (folds the first
               compacted ledger in)
    view:      a read_compacted reader reading the whole compacted view from the start

    .venv/bin/python benchmarks/compaction_bench.py [--messages N] [--keys K] [--batched R]
        [--only memory|bookie]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "compaction"))

from compaction_helpers import Workload  # noqa: E402

from magnetar.broker.compaction import CompactedTopicReader, Compactor  # noqa: E402
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position  # noqa: E402
from magnetar.testing.ml_conformance import LocalBookieHarness, MemoryHarness  # noqa: E402

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=50_000, min_ledger_rollover_time_ms=0)


async def fill(ml, workload: Workload, n: int, window: int = 500) -> int:
    entries = workload.entries(n)
    for i in range(0, len(entries), window):
        await asyncio.gather(*(ml.add_entry(d, num_messages=m) for d, m in entries[i : i + window]))
    return len(entries)


async def bench(label: str, harness, bk_of, messages: int, keys: int, batched: float) -> None:
    f = await harness.new_factory(CONFIG)
    ml = await f.open("bench/ns/persistent/compaction")
    bk = bk_of(f)
    w = Workload(seed=5, keys=keys, batched_ratio=batched)
    n_entries = await fill(ml, w, messages)
    compactor = Compactor(bk, harness.clock)
    t0 = time.perf_counter()
    r = await compactor.compact(ml)
    dt = time.perf_counter() - t0
    print(
        f"{label:7s} compact   {r.messages_read / dt:10,.0f} msg/s  {r.entries_read / dt:9,.0f} entries/s"
        f"  ({r.messages_read} msgs in {n_entries} entries -> {r.entries_written} compacted entries,"
        f" {r.keys} keys, {dt:.2f} s)"
    )
    more = await fill(ml, w, messages // 10)
    t0 = time.perf_counter()
    r2 = await compactor.compact(ml)
    dt = time.perf_counter() - t0
    print(
        f"{label:7s} recompact {r2.messages_read / dt:10,.0f} msg/s  ({r2.messages_read} msgs: old compacted"
        f" ledger + {more} new entries, {dt:.2f} s)"
    )
    cursor = await ml.open_cursor("view", InitialPosition.EARLIEST)
    reader = CompactedTopicReader(ml, cursor, bk, start=Position.EARLIEST)
    t0 = time.perf_counter()
    got = 0
    while batch := await reader.read_entries(100):
        got += len(batch)
    dt = time.perf_counter() - t0
    print(f"{label:7s} view      {got / dt:10,.0f} entries/s  ({got} entries, {dt * 1000:.1f} ms)")
    await reader.close()


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=1_000)
    p.add_argument("--batched", type=float, default=0.5)
    p.add_argument("--only", choices=["memory", "bookie"])
    a = p.parse_args()
    print(f"{a.messages} messages over {a.keys} keys, {a.batched:.0%} of entries batched (1-20 records)")
    if a.only in (None, "memory"):
        h = MemoryHarness()
        try:
            await bench("memory", h, lambda f: h.bk, a.messages, a.keys, a.batched)
        finally:
            await h.aclose()
    if a.only in (None, "bookie"):
        tmp = tempfile.mkdtemp(prefix="compaction-bench-")
        h = await LocalBookieHarness(tmp).start()
        try:
            await bench("bookie", h, lambda f: f.ctx.bookkeeper, a.messages, a.keys, a.batched)
        finally:
            await h.aclose()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
