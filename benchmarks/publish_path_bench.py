"""CPU per add on the publish path below the protocol: topic-style adds into a managed ledger
over the real ledger client and the in-process bookie (standalone's stack).

Theory of operation: the broker's SEND handler starts one add per message and does not wait
for it; receipts follow as adds complete.  This drives the same stack the same way without a
socket or a client process: ``--window`` adds outstanding, each started as the topic starts it
(``add_entry_cb`` when the managed ledger offers it, else ``add_entry_nowait``, else a task
running ``add_entry``),
and reports this process's CPU microseconds per add (the journal thread included).  CPU per
add, unlike adds/s, holds still on a machine shared with other work, so base and branch can
be compared back to back.

    .venv/bin/python benchmarks/publish_path_bench.py [--entries 50000] [--window 1000] [--sync]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from magnetar.managed_ledger.api import ManagedLedgerConfig
from magnetar.testing.ml_conformance import LocalBookieHarness

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=50_000, min_ledger_rollover_time_ms=0)


async def run(entries: int, window: int, size: int, sync: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="magnetar-publish-bench-") as d:
        h = await LocalBookieHarness(d, sync_journal=sync).start()
        try:
            f = await h.new_factory(CONFIG)
            ml = await f.open("bench/ns/persistent/publish")
            payload = b"x" * size
            nowait = getattr(ml, "add_entry_nowait", None)
            with_callback = getattr(ml, "add_entry_cb", None)  # the topic's way since pub15
            room = asyncio.Semaphore(window)
            await ml.add_entry(payload)  # the ledger exists on the bookie: steady state from here

            def start() -> asyncio.Future:
                fut = nowait(payload, num_messages=1) if nowait is not None else None
                return fut if fut is not None else asyncio.ensure_future(ml.add_entry(payload))

            done = 0
            finished = asyncio.get_running_loop().create_future()

            def completed(_f: asyncio.Future) -> None:
                nonlocal done
                room.release()
                done += 1
                if done == entries and not finished.done():
                    finished.set_result(None)

            def stored(_pos: object, exc: BaseException | None) -> None:
                if exc is not None:
                    raise exc
                completed(None)  # type: ignore[arg-type]

            cpu0, t0 = time.process_time(), time.perf_counter()
            for _ in range(entries):
                await room.acquire()
                if with_callback is not None:
                    with_callback(payload, stored, num_messages=1)
                else:
                    start().add_done_callback(completed)
            await finished
            cpu, elapsed = time.process_time() - cpu0, time.perf_counter() - t0
            return cpu / entries * 1e6, entries / elapsed
        finally:
            await h.aclose()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--sync", action="store_true", help="journalSyncData=true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import uvloop

    results = [uvloop.run(run(args.entries, args.window, args.size, args.sync)) for _ in range(args.repeat)]
    cpu = sorted(r[0] for r in results)[len(results) // 2]
    rate = sorted(r[1] for r in results)[len(results) // 2]
    print(
        f"publish path, {args.size} B, {args.window} outstanding, journalSyncData={str(args.sync).lower()}: "
        f"{cpu:.1f} us CPU/add, {rate:,.0f} adds/s (medians of {args.repeat})"
    )


if __name__ == "__main__":
    main()
