"""Tiered storage figures: offload MB/s and read-from-tier msg/s, against reads from the bookie.

One ledger of --mb MB (entries of --size bytes) is written to a real in-process bookie
(LedgerStorage through the ledger client; journal fsync off, as standalone), then:

    offload:        copying it through the offloader (blocks + index, verified), MB/s
    bookie seq:     reading it back from the bookie in batches of --batch entries, msg/s
    tier seq:       the same from the tier (ranged GETs with read-ahead), msg/s
    bookie random:  --random single-entry reads at random positions, msg/s
    tier random:    the same from the tier (each a block fetch unless cached), msg/s

for the filesystem driver (a temp directory) and the aws-s3 driver (moto in server mode on a
loopback port: an S3 API over HTTP, not AWS's latency).  Figures, not pass/fail.

    .venv/bin/python benchmarks/offload_bench.py [--mb 64] [--size 1024] [--batch 100]
        [--random 2000] [--only filesystem|aws-s3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
from dataclasses import replace

from magnetar.managed_ledger.offload import OffloadPolicies, policies_from
from magnetar.managed_ledger.offload_blob import BlobStoreOffloader
from magnetar.testing.ml_conformance import LocalBookieHarness
from magnetar.testing.moto_s3 import MotoS3Server


async def _seq(handle, entries: int, batch: int) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    for first in range(0, entries, batch):
        await handle.read(first, min(entries - 1, first + batch - 1))
    return entries / (time.perf_counter() - t0)


async def _random(handle, entries: int, n: int) -> float:  # noqa: ANN001
    rng = random.Random(7)
    t0 = time.perf_counter()
    for _ in range(n):
        e = rng.randrange(entries)
        await handle.read(e, e)
    return n / (time.perf_counter() - t0)


async def run(args: argparse.Namespace) -> None:
    tmp = tempfile.mkdtemp(prefix="offload-bench-")
    harness = await LocalBookieHarness(f"{tmp}/bookie").start()
    bk = harness.new_bookkeeper()
    entries = args.mb * 1024 * 1024 // args.size
    h = await bk.create_ledger(1, 1, 1, password=b"")
    payload = b"x" * args.size
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(1000)  # adds in flight, below the ledger client's bound

    async def add() -> None:
        async with sem:
            await h.add_entry(payload)

    await asyncio.gather(*(add() for _ in range(entries)))
    await h.close()
    print(
        f"ledger: {entries:,} entries of {args.size} B ({args.mb} MB) written in {time.perf_counter() - t0:.1f} s"
    )
    rh = await bk.open_ledger(h.ledger_id, password=b"", recovery=False)
    print(f"{'bookie seq':>16}: {await _seq(rh, entries, args.batch):12,.0f} msg/s")
    print(f"{'bookie random':>16}: {await _random(rh, entries, args.random):12,.0f} msg/s")
    moto = None
    try:
        for driver in ("filesystem", "aws-s3"):
            if args.only and args.only != driver:
                continue
            if driver == "aws-s3":
                moto = MotoS3Server("bench").start()
                pol = replace(policies_from(moto.properties()), max_block_size_bytes=8 << 20)
            else:
                pol = OffloadPolicies(driver="filesystem", file_system_uri=f"{tmp}/tier")
            off = BlobStoreOffloader(pol)
            t0 = time.perf_counter()
            await off.offload(rh, "bench", {})
            dt = time.perf_counter() - t0
            print(f"{driver:>10} offload: {args.mb / dt:10.1f} MB/s ({dt:.2f} s, verified)")
            th = await off.read_offloaded(h.ledger_id, "bench")
            print(f"{driver:>10} tier seq: {await _seq(th, entries, args.batch):10,.0f} msg/s "
                  f"({th.range_gets} ranged GETs)")  # fmt: skip
            th2 = await off.read_offloaded(h.ledger_id, "bench")
            print(f"{driver:>7} tier random: {await _random(th2, entries, args.random):10,.0f} msg/s "
                  f"({th2.range_gets} ranged GETs)")  # fmt: skip
            await off.delete_offloaded(h.ledger_id, "bench")
            await off.aclose()
    finally:
        if moto is not None:
            moto.stop()
        await rh.close()
        await harness.aclose()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=64)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--random", type=int, default=2000)
    p.add_argument("--only", choices=("filesystem", "aws-s3"))
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
