"""``magnetar perf produce|consume``: load generator in the manner of ``pulsar-perf``.

Theory of operation: it drives any Pulsar-protocol broker (Magnetar or Apache
Pulsar) through Magnetar's own asyncio client (``magnetar.client``), so it
works after a plain ``pip install`` of Magnetar.  Everything runs in one event
loop: producers are tasks that pace ``send_async`` to their share of
``--rate`` (0 = as fast as the client accepts, bounded by ``--max-pending``);
the send latency is the time from ``send_async`` to its receipt.  Consumers are
tasks too; their latency is end to end (receive time minus the message's
publish time, both from this host's clock, so it is meaningful against a local
broker).  Every ``--interval`` seconds one line is printed with
msg/s, MB/s and latency percentiles of that interval; a total line closes the
run.  Latency samples are kept per interval in a bounded reservoir, so memory
stays flat however long the run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

RESERVOIR_SAMPLES_MAX = 100_000
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "perf",
        help="pulsar-perf style load generator",
        description="Load generator like pulsar-perf, on Magnetar's asyncio client.",
    )
    psub = p.add_subparsers(dest="perf_command", metavar="produce|consume", required=True)
    prod = psub.add_parser("produce", help="publish messages and report throughput and send latency")
    _common(prod)
    prod.add_argument(
        "-r", "--rate", type=float, default=100.0, help="total msg/s over all producers (0 = max)"
    )
    prod.add_argument("-s", "--size", type=int, default=1024, help="message size in bytes (default 1024)")
    prod.add_argument("-n", "--num-producers", type=int, default=1, help="producers per topic")
    prod.add_argument("-b", "--batch", choices=("on", "off"), default="on", help="batching (default on)")
    prod.add_argument("--batch-max-publish-delay-ms", type=int, default=1, help="batching delay (default 1)")
    prod.add_argument("--batch-max-messages", type=int, default=1000)
    prod.add_argument("--max-pending", type=int, default=1000, help="pending messages per producer")
    prod.add_argument("--compression", default="NONE", help="NONE, LZ4, ZLib, ZSTD or SNAPPY")
    prod.set_defaults(func=run_produce)
    cons = psub.add_parser("consume", help="consume messages and report throughput and end-to-end latency")
    _common(cons)
    cons.add_argument("-n", "--num-consumers", type=int, default=1, help="consumers per topic")
    cons.add_argument("-ss", "--subscription", default="perf-sub", help="subscription name")
    cons.add_argument("-st", "--subscription-type", default="Exclusive", help="Exclusive, Shared, Failover")
    cons.add_argument("--receiver-queue-size", type=int, default=1000)
    cons.add_argument(
        "--earliest", action="store_true", help="start a new subscription at the earliest message"
    )
    cons.set_defaults(func=run_consume)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("topics", nargs="+", help="topic name(s)")
    p.add_argument("-u", "--service-url", default="pulsar://localhost:6650", help="pulsar:// or http:// URL")
    p.add_argument("-t", "--num-topics", type=int, default=1, help="with N > 1, topics get suffixes -0..-N-1")
    p.add_argument(
        "--test-duration", type=float, default=0, help="seconds to run (0 = until messages/Ctrl-C)"
    )
    p.add_argument("-m", "--num-messages", type=int, default=0, help="stop after this many (0 = no limit)")
    p.add_argument("-i", "--interval", type=float, default=5.0, help="seconds between report lines")


class IntervalStats:
    """Counts and a bounded latency reservoir for one reporting interval (thread-safe)."""

    def __init__(self, rng: random.Random) -> None:
        self._lock = threading.Lock()
        self._rng = rng
        self.reset()

    def reset(self) -> tuple[int, int, list[float]]:
        with self._lock:
            old = (getattr(self, "count", 0), getattr(self, "nbytes", 0), getattr(self, "samples", []))
            self.count, self.nbytes, self.samples, self._seen = 0, 0, [], 0
        return old

    def record(self, nbytes: int, latency_ms: float) -> None:
        with self._lock:
            self.count += 1
            self.nbytes += nbytes
            self._seen += 1
            if len(self.samples) < RESERVOIR_SAMPLES_MAX:
                self.samples.append(latency_ms)
            else:
                j = self._rng.randrange(self._seen)
                if j < RESERVOIR_SAMPLES_MAX:
                    self.samples[j] = latency_ms


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, int(round(pct / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def format_line(label: str, count: int, nbytes: int, seconds: float, samples: list[float]) -> str:
    s = sorted(samples)
    rate = count / seconds if seconds > 0 else 0.0
    mbps = nbytes / seconds / (1024 * 1024) if seconds > 0 else 0.0
    mean = sum(s) / len(s) if s else 0.0
    pcts = " - ".join(f"p{p:g} {percentile(s, p):.3f}" for p in PERCENTILES)
    return (
        f"{label}: {rate:10.1f} msg/s --- {mbps:8.3f} MB/s --- latency ms: mean {mean:.3f} - {pcts} - "
        f"max {s[-1] if s else 0.0:.3f}"
    )


def _topics(args: argparse.Namespace) -> list[str]:
    if args.num_topics <= 1:
        return list(args.topics)
    return [f"{t}-{i}" for t in args.topics for i in range(args.num_topics)]


def _new_client(service_url: str) -> Any:
    from magnetar.client import Client

    return Client(service_url, operation_timeout_seconds=30)


async def _close_all(endpoints: list, client: Any) -> None:
    """Close producers/consumers, then the client; a broker that went away must not crash the report."""
    for e in endpoints:
        try:
            await e.close()
        except Exception as exc:
            print(f"close failed: {exc}", file=sys.stderr)
    endpoints.clear()
    await client.close()


async def _report_loop(
    label: str, stats: IntervalStats, args: argparse.Namespace, done: Callable[[], bool]
) -> int:
    start = last = time.monotonic()
    total = total_bytes = 0
    all_samples: list[float] = []
    deadline = start + args.test_duration if args.test_duration > 0 else float("inf")
    next_report = start + args.interval
    while not done() and time.monotonic() < deadline:
        await asyncio.sleep(max(0.01, min(0.05, deadline - time.monotonic())))
        now = time.monotonic()
        if now < next_report and not done() and now < deadline:
            continue
        next_report = now + args.interval
        count, nbytes, samples = stats.reset()
        total, total_bytes = total + count, total_bytes + nbytes
        all_samples.extend(samples[: RESERVOIR_SAMPLES_MAX // 10])
        print(format_line(label, count, nbytes, now - last, samples), flush=True)
        last = now
    count, nbytes, samples = stats.reset()
    total, total_bytes = total + count, total_bytes + nbytes
    all_samples.extend(samples)
    print(
        format_line(f"{label} total", total, total_bytes, time.monotonic() - start, all_samples), flush=True
    )
    return total


def run_produce(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_produce(args))
    except KeyboardInterrupt:
        return 130


async def _produce(args: argparse.Namespace) -> int:
    from magnetar.client import PulsarException

    topics = _topics(args)
    client = _new_client(args.service_url)
    stats = IntervalStats(random.Random(1))
    sent = [0]
    try:
        producers = [
            await client.create_producer(
                t,
                batching_enabled=args.batch == "on",
                batching_max_publish_delay_ms=args.batch_max_publish_delay_ms,
                batching_max_messages=args.batch_max_messages,
                max_pending_messages=args.max_pending,
                block_if_queue_full=True,
                compression_type=args.compression,
            )
            for t in topics
            for _ in range(args.num_producers)
        ]
    except PulsarException as exc:
        print(f"magnetar perf: {type(exc).__name__}: {exc}", file=sys.stderr)
        await client.close()
        return 1
    per_producer_rate = args.rate / len(producers) if args.rate > 0 else 0.0
    payload = b"m" * args.size

    def take_one() -> bool:
        if args.num_messages and sent[0] >= args.num_messages:
            return False
        sent[0] += 1
        return True

    async def produce(producer: Any) -> None:
        n = 0
        t0 = time.monotonic()
        while take_one():
            if per_producer_rate:
                delay = t0 + n / per_producer_rate - time.monotonic()
                await asyncio.sleep(max(0.0, delay))  # yield even when behind: consumers share the loop
            began = time.perf_counter()
            fut = await producer.send_async(payload)

            def on_done(f: asyncio.Future, began: float = began) -> None:
                if not f.cancelled() and f.exception() is None:
                    stats.record(len(payload), (time.perf_counter() - began) * 1000.0)

            fut.add_done_callback(on_done)
            n += 1
        await producer.flush()

    tasks = [asyncio.create_task(produce(p)) for p in producers]
    total = await _report_loop("Produced", stats, args, lambda: all(t.done() for t in tasks))
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await _close_all(producers, client)
    return 0 if total > 0 else 1


def run_consume(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_consume(args))
    except KeyboardInterrupt:
        return 130


async def _consume(args: argparse.Namespace) -> int:
    from magnetar.client import PulsarException, Timeout

    topics = _topics(args)
    client = _new_client(args.service_url)
    stats = IntervalStats(random.Random(2))
    stop = asyncio.Event()
    received = [0]
    try:
        consumers = [
            await client.subscribe(
                t,
                args.subscription,
                consumer_type=args.subscription_type,
                receiver_queue_size=args.receiver_queue_size,
                initial_position="Earliest" if args.earliest else "Latest",
            )
            for t in topics
            for _ in range(args.num_consumers)
        ]
    except PulsarException as exc:
        print(f"magnetar perf: {type(exc).__name__}: {exc}", file=sys.stderr)
        await client.close()
        return 1

    async def consume(consumer: Any) -> None:
        while not stop.is_set():
            try:
                msg = await consumer.receive(200)
            except Timeout:
                continue
            latency_ms = max(0.0, time.time() * 1000.0 - msg.publish_timestamp())
            stats.record(len(msg.data()), latency_ms)
            await consumer.acknowledge(msg)
            received[0] += 1
            if args.num_messages and received[0] >= args.num_messages:
                stop.set()

    tasks = [asyncio.create_task(consume(c)) for c in consumers]
    await _report_loop("Consumed", stats, args, stop.is_set)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await _close_all(consumers, client)
    return 0
