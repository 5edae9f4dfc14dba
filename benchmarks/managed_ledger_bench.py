"""Managed-ledger throughput: adds, tailing reads, backlog reads, and the ack-hole snapshot.

Prints, over the in-memory BookKeeper and over the real ledger client + in-process bookie
(journal fsync off by default, as standalone; ``--sync`` turns it on):

    add:       entries/s and MB/s with --window adds in flight (pipelined)
    tail read: a cursor keeping up with the writer (entries come from the entry cache)
    cached:    a cursor just behind the tail reading what the entry cache holds
    backlog:   a cursor reading everything again with the cache cleared (bookie reads,
               read-ahead batches)
    acks:      serial individual acks (each awaited), durable-before-return vs rate-limited

and, once, the ack-hole figures: --holes alternating individual acks (every second entry),
the time to ack them, the cursor snapshot size (capped at managedLedgerMaxUnackedRangesToPersist
= 10,000 ranges), the time to persist it and to restore the cursor on reopen.

    .venv/bin/python benchmarks/managed_ledger_bench.py [--entries N] [--size B] [--window W]
        [--holes H] [--sync] [--only memory|bookie]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from dataclasses import replace

from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position
from magnetar.testing.ml_conformance import LocalBookieHarness, MemoryHarness

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=50_000, min_ledger_rollover_time_ms=0)


def _rate(n: int, nbytes: int, seconds: float) -> str:
    return f"{n / seconds:12,.0f} entries/s  {nbytes / seconds / 1e6:8.1f} MB/s  ({n} in {seconds:.2f} s)"


async def bench_stack(label: str, harness, entries: int, size: int, window: int) -> None:
    f = await harness.new_factory(CONFIG)
    ml = await f.open("bench/ns/persistent/throughput")
    tail = await ml.open_cursor("tail", InitialPosition.LATEST)
    payload = b"x" * size
    sem = asyncio.Semaphore(window)
    read_count = 0

    async def add_one() -> Position:
        async with sem:
            return await ml.add_entry(payload)

    async def tail_reader() -> None:
        nonlocal read_count
        while read_count < entries:
            got = await tail.read_entries_or_wait(200)
            read_count += len(got)

    reader = asyncio.ensure_future(tail_reader())
    t0 = time.perf_counter()
    chunk = 10_000
    positions: list[Position] = []
    for start in range(0, entries, chunk):
        positions += await asyncio.gather(*(add_one() for _ in range(min(chunk, entries - start))))
    t_add = time.perf_counter() - t0
    await asyncio.wait_for(reader, 300)
    t_tail = time.perf_counter() - t0
    print(
        f"{label:8s} add       {_rate(entries, entries * size, t_add)}  window={window} size={size}B",
        flush=True,
    )
    print(
        f"{label:8s} tail read {_rate(entries, entries * size, t_tail)}  (concurrent with the adds)",
        flush=True,
    )

    # A reader just behind the tail: what the entry cache serves (no bookie reads).
    cached = min(entries - 1, (f.cache.max_bytes // (size + 64)) // 2)
    behind = await ml.new_non_durable_cursor(positions[-cached - 1])
    t0 = time.perf_counter()
    n = 0
    while got := await behind.read_entries(200):
        n += len(got)
    t_cached = time.perf_counter() - t0
    print(
        f"{label:8s} cached    {_rate(n, n * size, t_cached)}  (just behind the tail: entry cache)",
        flush=True,
    )

    f.cache.clear()
    backlog = await ml.new_non_durable_cursor(Position.EARLIEST)  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    n = 0
    while got := await backlog.read_entries(500):
        n += len(got)
    t_back = time.perf_counter() - t0
    print(f"{label:8s} backlog   {_rate(n, n * size, t_back)}  (cache cleared: bookie reads)", flush=True)

    # Acks, one awaited call per entry (as a consumer connection acks), every other entry so
    # holes stay open: durable before return (rate 0) vs Pulsar's rate-limited persistence.
    for rate in (0.0, 1.0):
        await ml.set_config(replace(CONFIG, mark_delete_rate_per_s=rate))
        acker = await ml.open_cursor(f"acker-{rate}", InitialPosition.EARLIEST)
        sample = positions[1 : min(len(positions), 4001) : 2]
        t0 = time.perf_counter()
        for p in sample:
            await acker.delete([p])
        t_ack = time.perf_counter() - t0
        await acker.flush()
        print(
            f"{label:8s} acks      {len(sample) / t_ack:12,.0f} acks/s  mark_delete_rate_per_s={rate} "
            f"({len(sample)} serial individual acks, {acker.store.persists} snapshots written)",
            flush=True,
        )
    await f.aclose()


async def bench_holes(harness, holes: int) -> None:
    cfg = ManagedLedgerConfig(max_entries_per_ledger=500_000, min_ledger_rollover_time_ms=0)
    f = await harness.new_factory(cfg)
    ml = await f.open("bench/ns/persistent/holes")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    n = 2 * holes
    positions: list[Position] = []
    for start in range(0, n, 10_000):
        positions += await asyncio.gather(*(ml.add_entry(b"h") for _ in range(min(10_000, n - start))))
    t0 = time.perf_counter()
    odd = positions[1::2]
    for i in range(0, len(odd), 50_000):
        await c.delete(odd[i : i + 50_000])
    t_ack = time.perf_counter() - t0
    t0 = time.perf_counter()
    await c.mark_delete(Position(positions[0].ledger_id, -1))  # forces one more snapshot
    t_snap = time.perf_counter() - t0
    ranges = len(c.individually_deleted_ranges())
    size = c.store.snapshot_bytes_last
    await f.aclose()
    f2 = await harness.new_factory(cfg)
    t0 = time.perf_counter()
    c2 = (await f2.open("bench/ns/persistent/holes")).cursors["s"]
    t_restore = time.perf_counter() - t0
    kept = len(c2.individually_deleted_ranges())
    print(
        f"holes    {holes:,} alternating acks in {t_ack:.2f} s ({holes / t_ack:,.0f} acks/s); "
        f"{ranges:,} ranges in memory; snapshot {size:,} bytes holding {kept:,} ranges "
        f"(cap {cfg.max_unacked_ranges_to_persist:,}); one persist {t_snap * 1000:.1f} ms; "
        f"reopen+restore {t_restore * 1000:.0f} ms",
        flush=True,
    )
    await f2.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--holes", type=int, default=1_000_000)
    ap.add_argument("--sync", action="store_true", help="fsync the bookie journal (journalSyncData=true)")
    ap.add_argument("--only", choices=["memory", "bookie"])
    args = ap.parse_args()
    if args.only != "bookie":
        h = MemoryHarness()
        await bench_stack("memory", h, args.entries, args.size, args.window)
        await h.aclose()
        h = MemoryHarness()
        await bench_holes(h, args.holes)
        await h.aclose()
    if args.only != "memory":
        d = tempfile.mkdtemp(prefix="ml-bench-")
        try:
            h = await LocalBookieHarness(d, sync_journal=args.sync).start()
            await bench_stack(
                "bookie" + ("+fs" if args.sync else ""), h, args.entries, args.size, args.window
            )
            await h.aclose()
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
