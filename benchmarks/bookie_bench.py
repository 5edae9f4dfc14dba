"""Bookie add throughput and latency, next to the raw fsync rate of the same disk.

Prints, for 100-byte and 1 KB entries, with journal fsync on and off
(journalSyncData), through the in-process client and through TCP
(server + wire client on localhost):

    adds/s, MB/s, p50 / p99 add latency (ms), journal fsyncs and adds per fsync,
    and CPU microseconds per add (the whole process, journal and storage threads
    included: steadier than adds/s on a shared machine; "loop us" is the event
    loop thread's share)

and the raw fdatasync rate of the directory's disk (write 100 bytes +
fdatasync, back to back, one thread; appending and into preallocated space as
the journal does; before and after the cases since a shared disk drifts),
measured in the same run, so the
journal figures can be read against the physical limit: with fsync on, one
outstanding add can't beat the raw rate; group commit is what lets many
outstanding adds go past it.

    .venv/bin/python benchmarks/bookie_bench.py [--dir D] [--seconds S] [--concurrency C]
        [--loop uvloop|asyncio]

The event loop is uvloop by default, as ``magnetar standalone`` and ``magnetar bookie`` run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time

from magnetar.bookie.config import BookieConfig
from magnetar.bookie.entry_format import encode_entry
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.server import BookieServer
from magnetar.bookie.storage import LedgerStorage
from magnetar.bookie.wire_client import WireBookieClient


def raw_fsync_latencies(directory: str, seconds: float, prealloc: bool = False) -> list[float]:
    """Seconds per (write 100 bytes + fdatasync), back to back, one thread; with ``prealloc``
    into a posix_fallocate'd region, as the journal writes (journalPreAllocSizeMB)."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    lat = []
    offset = 0
    try:
        if prealloc:
            os.posix_fallocate(fd, 0, 64 * 1024 * 1024)
            os.fsync(fd)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            os.pwrite(fd, b"x" * 100, offset)
            offset += 100
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.remove(path)
    return lat


def raw_fsync_rate(directory: str, seconds: float, prealloc: bool = False) -> tuple[float, float]:
    """(fdatasyncs per second, p50 latency ms): :func:`raw_fsync_latencies` summed up."""
    lat = raw_fsync_latencies(directory, seconds, prealloc)
    return len(lat) / sum(lat), statistics.median(lat) * 1000


def print_raw(base: str, seconds: float, when: str) -> None:
    for prealloc in (False, True):
        lat = raw_fsync_latencies(base, seconds, prealloc)
        kind = "into preallocated space" if prealloc else "appending (file grows)"
        print(
            f"raw fdatasync {when}, 100-byte write {kind}: {len(lat) / sum(lat):,.0f}/s, "
            f"p50 {pct(lat, 0.5):.3f} ms, p99 {pct(lat, 0.99):.3f} ms",
            flush=True,
        )


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] * 1000


async def run_case(
    directory: str,
    entry_bytes: int,
    sync: bool,
    wire: bool,
    seconds: float,
    concurrency: int,
    group_wait_ms: float = 2.0,
    flush_when_empty: bool = True,
) -> dict[str, float]:
    shutil.rmtree(directory, ignore_errors=True)
    cfg = BookieConfig.for_data_dir(
        directory,
        journal_sync_data=sync,
        journal_max_group_wait_ms=group_wait_ms,
        journal_flush_when_queue_empty=flush_when_empty,
    )
    storage = LedgerStorage(cfg, bookie_id="bench")
    await storage.open()
    local = LocalBookieClient(storage)
    server = client = None
    if wire:
        server = BookieServer(local, "127.0.0.1", 0)
        port = await server.start()
        client = WireBookieClient("bench", "127.0.0.1", port)
    target = client or local
    payload = os.urandom(max(0, entry_bytes - 36))
    latencies: list[float] = []
    nowait = getattr(target, "add_entry_nowait", None)
    next_id = [0]
    deadline = time.perf_counter() + seconds

    async def worker(ledger_id: int) -> None:
        while time.perf_counter() < deadline:
            eid = next_id[0]
            next_id[0] += 1
            data = encode_entry(ledger_id, eid, eid - 1, 0, payload)
            t0 = time.perf_counter()
            # The ledger client's path: the task-free add when the client has it (in-process).
            fut = nowait(ledger_id, eid, b"k", data) if nowait is not None else None
            await (fut if fut is not None else target.add_entry(ledger_id, eid, b"k", data))
            latencies.append(time.perf_counter() - t0)

    j0 = dict(storage.journal.statistics())
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    loop_cpu0 = time.thread_time()
    await asyncio.gather(*(worker(1) for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    loop_cpu = time.thread_time() - loop_cpu0
    j1 = storage.journal.statistics()
    if client is not None:
        await client.aclose()
    if server is not None:
        await server.aclose()
    await storage.aclose()
    shutil.rmtree(directory, ignore_errors=True)
    n = len(latencies)
    groups = max(1, j1["groups"] - j0["groups"])
    return {
        "adds_s": n / elapsed,
        "mb_s": n * entry_bytes / elapsed / 1e6,
        "p50_ms": pct(latencies, 0.50),
        "p99_ms": pct(latencies, 0.99),
        "fsyncs_s": (j1["fsyncs"] - j0["fsyncs"]) / elapsed,
        "adds_per_group": n / groups,
        "cpu_us": cpu / max(1, n) * 1e6,
        "loop_cpu_us": loop_cpu / max(1, n) * 1e6,
    }


async def read_case(directory: str, entries: int, entry_bytes: int, read_ahead: int) -> dict[str, float]:
    """Write, restart (cold caches), then read the ledger back in order, one read at a time."""
    shutil.rmtree(directory, ignore_errors=True)
    cfg = BookieConfig.for_data_dir(
        directory, journal_sync_data=False, journal_max_group_wait_ms=0, read_ahead_batch_size=read_ahead
    )
    storage = LedgerStorage(cfg, bookie_id="bench")
    await storage.open()
    payload = os.urandom(max(0, entry_bytes - 36))
    for start in range(0, entries, 256):
        await asyncio.gather(
            *(
                storage.add_entry(1, e, b"k", encode_entry(1, e, e - 1, 0, payload))
                for e in range(start, min(entries, start + 256))
            )
        )
    await storage.aclose()
    storage = LedgerStorage(cfg, bookie_id="bench")
    await storage.open()
    t0 = time.perf_counter()
    for e in range(entries):
        await storage.read_entry(1, e)
    elapsed = time.perf_counter() - t0
    await storage.aclose()
    shutil.rmtree(directory, ignore_errors=True)
    return {"reads_s": entries / elapsed, "mb_s": entries * entry_bytes / elapsed / 1e6}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--group-wait-ms", type=float, default=2.0, help="journalMaxGroupWaitMSec (BK default 2)")
    ap.add_argument(
        "--no-flush-when-empty",
        action="store_true",
        help="journalFlushWhenQueueEmpty=false (BookKeeper's default: every group waits the window)",
    )
    ap.add_argument("--local-only", action="store_true", help="skip the TCP cases")
    ap.add_argument("--no-reads", action="store_true", help="skip the read cases")
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    ap.add_argument("--sizes", default="100,1024", help="entry sizes in bytes, comma-separated")
    args = ap.parse_args()
    flush_when_empty = not args.no_flush_when_empty
    base = args.dir or tempfile.mkdtemp(prefix="bookie-bench-")
    os.makedirs(base, exist_ok=True)
    print(f"disk: {base} (raw figures: one thread, measured before and after the cases)")
    print_raw(base, args.seconds, "before")
    print(
        f"each case: {args.seconds:.1f} s, {args.concurrency} adds outstanding (and 1 outstanding for fsync on), "
        f"journalMaxGroupWaitMSec={args.group_wait_ms:g}, journalFlushWhenQueueEmpty={str(flush_when_empty).lower()}, "
        f"event loop {args.loop}"
    )
    header = (
        f"{'path':6} {'entry':>6} {'fsync':>5} {'outst':>5} {'adds/s':>9} {'MB/s':>7} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'fsyncs/s':>9} {'adds/group':>10} {'cpu us/add':>10} {'loop us':>7}"
    )
    print(header)
    print("-" * len(header))
    for wire in (False,) if args.local_only else (False, True):
        for size in [int(x) for x in args.sizes.split(",")]:
            for sync in (True, False):
                for conc in (1, args.concurrency) if sync else (args.concurrency,):
                    r = await run_case(
                        os.path.join(base, "data"),
                        size,
                        sync,
                        wire,
                        args.seconds,
                        conc,
                        args.group_wait_ms,
                        flush_when_empty,
                    )
                    print(
                        f"{'tcp' if wire else 'local':6} {size:>6} {'on' if sync else 'off':>5} {conc:>5} "
                        f"{r['adds_s']:>9,.0f} {r['mb_s']:>7.2f} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
                        f"{r['fsyncs_s']:>9,.0f} {r['adds_per_group']:>10.1f} {r['cpu_us']:>10.1f} {r['loop_cpu_us']:>7.1f}",
                        flush=True,
                    )
    print_raw(base, args.seconds, "after ")
    print("(outstanding 1 with fsync on is the lone writer: its p50 should be near the raw fdatasync p50)")
    if args.no_reads:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        return
    print()
    print(
        "sequential reads of 20,000 1 KB entries after a restart (bookie caches cold, OS page cache warm), one at a time, local:"
    )
    for ra in (1, 100):
        r = await read_case(os.path.join(base, "data"), 20_000, 1024, ra)
        label = "read-ahead off" if ra == 1 else f"read-ahead {ra} entries"
        print(f"  {label:24} {r['reads_s']:>9,.0f} reads/s {r['mb_s']:>7.2f} MB/s", flush=True)
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


def _parse_loop() -> str:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--loop", default="uvloop")
    return ap.parse_known_args()[0].loop


if __name__ == "__main__":
    if _parse_loop() == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())
