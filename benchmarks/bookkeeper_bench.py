"""Ledger-client (magnetar.bookkeeper) add and read throughput and latency.

Cases, each for 100-byte and 1 KB entries with a window of outstanding adds:

* ``fake``   -- E=3 Qw=2 Qa=2 over in-memory fake bookies: the client's own cost
  (framing, CRC32-C, quorum tracking, tasks), no I/O;
* ``local``  -- E=Qw=Qa=1 over one real bookie storage in-process (standalone's
  path), journal fsync on;
* ``tcp``    -- E=3 Qw=2 Qa=2 over three real bookies in this process, reached
  through the bookie wire protocol on localhost, journal fsync on.

Prints adds/s, MB/s, p50/p99 add latency (ms), then sequential read entries/s
of what was written.  Figures, never pass/fail.

    .venv/bin/python benchmarks/bookkeeper_bench.py [--seconds S] [--window W] [--cases fake,local,tcp]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time

from magnetar.bookie.app import Bookie
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookie.wire_client import WireBookieClientPool
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.fake_bookie import FakeBookiePool


async def _measure(
    bk: BookKeeperClient, e: int, qw: int, qa: int, size: int, seconds: float, window: int
) -> str:
    wh = await bk.create_ledger(e, qw, qa)
    payload = b"x" * size
    latencies: list[float] = []
    inflight: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    deadline = start + seconds

    async def one() -> None:
        t0 = time.perf_counter()
        await wh.add_entry(payload)
        latencies.append(time.perf_counter() - t0)

    while time.perf_counter() < deadline:
        while len(inflight) < window:
            t = asyncio.ensure_future(one())
            inflight.add(t)
            t.add_done_callback(inflight.discard)
        await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
    await asyncio.gather(*inflight)
    elapsed = time.perf_counter() - start
    n = len(latencies)
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(n - 1, int(n * 0.99))] * 1000
    await wh.close()
    r0 = time.perf_counter()
    read = 0
    rh = await bk.open_ledger(wh.ledger_id, recovery=False)
    for first in range(0, rh.last_add_confirmed + 1, 500):
        read += len(await rh.read(first, min(first + 499, rh.last_add_confirmed)))
    r_elapsed = time.perf_counter() - r0
    return (
        f"{size:>5} B  adds/s {n / elapsed:>9.0f}  MB/s {n * size / elapsed / 1e6:>7.2f}  "
        f"p50 {p50:>7.2f} ms  p99 {p99:>7.2f} ms  | reads/s {read / r_elapsed:>9.0f}"
    )


async def _registered(server: MemoryMetadataServer, ids: list[str]) -> None:
    await FakeBookiePool().register(server.session(), only=ids)


async def case_fake(args: argparse.Namespace) -> None:
    clock = RealClock()
    server = MemoryMetadataServer(clock=clock)
    pool = FakeBookiePool.of(3, clock)
    await _registered(server, sorted(pool.bookies))
    bk = BookKeeperClient(server.session(), pool, clock, Rng(1), ClientConfig())
    for size in (100, 1024):
        print("fake  E3 Qw2 Qa2 ", await _measure(bk, 3, 2, 2, size, args.seconds, args.window), flush=True)
    await bk.aclose()


async def case_local(args: argparse.Namespace) -> None:
    clock = RealClock()
    tmp = tempfile.mkdtemp(prefix="bkbench-", dir=args.dir)
    try:
        storage = LedgerStorage(BookieConfig.for_data_dir(tmp), clock=clock, bookie_id="127.0.0.1:3181")
        await storage.open()
        server = MemoryMetadataServer(clock=clock)
        await _registered(server, ["127.0.0.1:3181"])
        pool = LocalBookieClientPool(LocalBookieClient(storage))
        bk = BookKeeperClient(server.session(), pool, clock, Rng(1), ClientConfig())
        for size in (100, 1024):
            print(
                "local E1 Qw1 Qa1 ", await _measure(bk, 1, 1, 1, size, args.seconds, args.window), flush=True
            )
        await bk.aclose()
        await storage.aclose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def case_tcp(args: argparse.Namespace) -> None:
    clock = RealClock()
    tmp = tempfile.mkdtemp(prefix="bkbench-", dir=args.dir)
    server = MemoryMetadataServer(clock=clock)
    bookies = []
    try:
        for i in range(3):
            cfg = BookieConfig.for_data_dir(f"{tmp}/b{i}", bookie_port=0)
            b = Bookie(cfg, server.session(), clock=clock)
            await b.start()
            bookies.append(b)
        pool = WireBookieClientPool()
        bk = BookKeeperClient(server.session(), pool, clock, Rng(1), ClientConfig())
        for size in (100, 1024):
            print(
                "tcp   E3 Qw2 Qa2 ", await _measure(bk, 3, 2, 2, size, args.seconds, args.window), flush=True
            )
        await bk.aclose()
        await pool.aclose()
    finally:
        for b in bookies:
            await b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--window", type=int, default=64, help="outstanding adds")
    p.add_argument("--dir", default=None, help="where the bookies' data goes (default: a temp dir)")
    p.add_argument("--cases", default="fake,local,tcp")
    args = p.parse_args()
    print(f"window {args.window} outstanding adds, {args.seconds:.0f} s per case")
    cases = {"fake": case_fake, "local": case_local, "tcp": case_tcp}
    for name in args.cases.split(","):
        asyncio.run(cases[name.strip()](args))


if __name__ == "__main__":
    main()
