"""Metadata-store throughput: put/get operations per second for each backend.

For memory, RocksDB (sync WAL writes, on --dir) and ZooKeeper (a local server
started for the run when Java and Debian's zookeeper jar are present; or
--zk host:port to use yours), prints:

    put ops/s    sequential (one outstanding put, 256-byte values)
    put ops/s    concurrent (--concurrency outstanding puts)
    get ops/s    sequential and concurrent
    CAS ops/s    update_with_cas on one hot node from --concurrency tasks

Figures, never pass/fail.

    .venv/bin/python benchmarks/metadata_bench.py [--ops N] [--concurrency C] [--dir D] [--zk HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable

from magnetar.metadata.api import MetadataStore
from magnetar.metadata.coordination import update_with_cas
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock, Rng

VALUE = bytes(range(256))


async def timed(n: int, concurrency: int, op: Callable[[int], Awaitable[object]]) -> float:
    """Runs op(0..n-1) with at most ``concurrency`` outstanding; returns ops/s."""
    next_i = 0

    async def worker() -> None:
        nonlocal next_i
        while next_i < n:
            i = next_i
            next_i += 1
            await op(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return n / (time.perf_counter() - start)


async def bench_store(name: str, store: MetadataStore, ops: int, concurrency: int) -> dict[str, float]:
    base = f"/bench/{name}-{time.time_ns()}"
    out: dict[str, float] = {}
    out["put seq"] = await timed(ops, 1, lambda i: store.put(f"{base}/a/n{i}", VALUE))
    out["put conc"] = await timed(ops, concurrency, lambda i: store.put(f"{base}/b/n{i}", VALUE))
    out["get seq"] = await timed(ops, 1, lambda i: store.get(f"{base}/a/n{i}"))
    out["get conc"] = await timed(ops, concurrency, lambda i: store.get(f"{base}/b/n{i}"))
    clock, rng = RealClock(), Rng(1)

    def inc(v: bytes | None) -> bytes:
        return str(int(v or b"0") + 1).encode()

    cas_ops = max(50, ops // 10)
    out["cas conc"] = await timed(
        cas_ops, concurrency, lambda i: update_with_cas(store, f"{base}/counter", inc, clock=clock, rng=rng)
    )
    got = await store.get(f"{base}/counter")
    assert got is not None and int(got.value) == cas_ops, "lost CAS update"
    await store.delete_recursive(base)
    return out


def start_zookeeper() -> tuple[object | None, str | None, str]:
    try:
        from magnetar.testing.zookeeper import ZooKeeperServer, find_zookeeper
    except ImportError as e:  # pytest missing in a minimal install
        return None, None, f"testing kit unavailable: {e}"
    found = find_zookeeper()
    if isinstance(found, str):
        return None, None, found
    server = ZooKeeperServer()
    server.start()
    return server, server.hosts, ""


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--dir", default=None, help="directory for the RocksDB store (default: a temp dir)")
    parser.add_argument("--zk", default=None, help="use this ZooKeeper (host:port) instead of starting one")
    args = parser.parse_args()
    clock = RealClock()
    workdir = args.dir or tempfile.mkdtemp(prefix="magnetar-mdbench-")
    results: dict[str, dict[str, float]] = {}

    store = await create_metadata_store("memory:bench", clock=clock)
    results["memory"] = await bench_store("memory", store, args.ops, args.concurrency)
    await store.aclose()

    store = await create_metadata_store(f"rocksdb:{workdir}/rocksdb", clock=clock)
    results["rocksdb"] = await bench_store("rocksdb", store, args.ops, args.concurrency)
    await store.aclose()

    zk_server, hosts, why = (None, args.zk, "") if args.zk else start_zookeeper()
    try:
        if hosts:
            store = await create_metadata_store(f"zk:{hosts}/magnetar-bench", clock=clock)
            results["zookeeper"] = await bench_store("zookeeper", store, args.ops, args.concurrency)
            await store.aclose()
        else:
            print(f"zookeeper: skipped ({why})")
    finally:
        if zk_server is not None:
            zk_server.close()  # type: ignore[attr-defined]
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    cols = ["put seq", "put conc", "get seq", "get conc", "cas conc"]
    print(f"ops={args.ops} concurrency={args.concurrency} value={len(VALUE)} B  (ops/s)")
    print(f"{'backend':<10}" + "".join(f"{c:>12}" for c in cols))
    for backend, row in results.items():
        print(f"{backend:<10}" + "".join(f"{row[c]:>12,.0f}" for c in cols))


if __name__ == "__main__":
    asyncio.run(main())
