"""Delayed delivery index memory: RSS growth while 1,000,000 delayed messages are indexed.

What it measures: the dispatcher's delay index (``DelayedDeliveryTracker``)
fed 1,000,000 entries whose ``deliver_at_time`` is an hour ahead, read in
batches of 1,000 as the dispatcher reads them from the cursor (the batch is
dropped afterwards, as the dispatcher drops what it read).  RSS (VmRSS) is
sampled before and after, for

* the capped index (default cap 100,000: the rest stays in storage and is
  found again by a rescan) -- what the broker runs;
* the same index with the cap raised to 1,000,000 (everything in memory,
  16 bytes a position in tick buckets);
* a naive index for comparison: a heap of (deliver_at, Position) tuples.

    .venv/bin/python benchmarks/delayed_delivery_bench.py [--messages 1000000]
"""

from __future__ import annotations

import argparse
import gc
import heapq
import time
from types import SimpleNamespace

from magnetar.broker.service.delayed_delivery import DelayedDeliveryTracker
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata
from magnetar.runtime import RealClock


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class NoTimerSupervisor:
    def spawn(self, coro, name=None):  # noqa: ANN001, ANN201
        coro.close()
        return SimpleNamespace(done=lambda: False, cancel=lambda: None)


def batches(n: int, size: int = 1000):  # noqa: ANN201
    now = int(time.time() * 1000)
    for start in range(0, n, size):
        out = []
        for i in range(start, min(n, start + size)):
            # deadlines spread over an hour, an hour from now
            md = new_message_metadata(
                producer_name="p",
                sequence_id=i,
                publish_time=now,
                deliver_at_time=now + 3_600_000 + (i % 3_600_000),
            )
            out.append(
                Entry(Position(10 + i // 50_000, i % 50_000), build_headers_and_payload(md, b"x" * 64))
            )
        yield out


def measure(label: str, n: int, index_factory) -> None:  # noqa: ANN001
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    index = index_factory()
    for batch in batches(n):
        index(batch)
    elapsed = time.perf_counter() - t0
    gc.collect()
    grown = rss_bytes() - before
    print(f"{label:48s} RSS +{grown / 2**20:8.1f} MiB  ({grown / n:6.1f} B/msg)  {n / elapsed:>9,.0f} msg/s")
    return index


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.messages
    topic = SimpleNamespace(clock=RealClock(), supervisor=NoTimerSupervisor())
    dispatcher = SimpleNamespace(subscription=SimpleNamespace(topic=topic), notify=lambda: None)
    print(f"{n:,} delayed messages (deliver_at one hour ahead), tick 1000 ms")

    def tracker(cap: int):  # noqa: ANN202
        def make():  # noqa: ANN202
            t = DelayedDeliveryTracker(dispatcher, tick_ms=1000, max_indexed=cap)

            def feed(batch):  # noqa: ANN001, ANN202
                t.filter(batch)

            feed.tracker = t  # type: ignore[attr-defined]
            return feed

        return make

    kept = []
    for label, cap in (
        ("bounded index (cap 100,000, rest rescanned)", 100_000),
        (f"full index (cap {n:,})", n),
    ):
        feed = measure(label, n, tracker(cap))
        t = feed.tracker
        print(f"{'':48s} indexed {t.size:,}, overflow={t.scan_from is not None}, stats={t.stats()}")
        kept.append(feed)
        del feed
    kept.clear()
    gc.collect()

    def naive():  # noqa: ANN202
        heap: list = []
        from magnetar.protocol.payload import peek_metadata

        def feed(batch):  # noqa: ANN001, ANN202
            for e in batch:
                heapq.heappush(heap, (peek_metadata(e.data).deliver_at_time, e.position))

        feed.heap = heap  # type: ignore[attr-defined]
        return feed

    measure("naive heap of (deliver_at, Position) tuples", n, naive)


if __name__ == "__main__":
    main()
