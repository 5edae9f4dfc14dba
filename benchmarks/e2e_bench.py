"""End-to-end figures: the official client against ``magnetar standalone`` and against the null broker.

Theory of operation: every number comes from the official ``pulsar-client``
driving a broker in another process over loopback, as a user would see it:

* publish throughput, 1 KB messages, batched (``send_async`` + flush) and
  unbatched (``send_async``, one entry per message);
* consume throughput from a backlog (the batched run's messages, read by a
  subscription that existed before they were published);
* end-to-end latency at a paced 5,000 msg/s (the send time travels in the
  payload; the consumer in the same process subtracts it on receipt):
  p50 / p99 / p99.9;
* startup-to-ready seconds (spawn to the ready line), idle RSS and idle CPU.

``--journal-sync-data`` chooses the embedded bookie's ``journalSyncData``:
``false`` (the standalone's default, as Pulsar's: an add is acknowledged once
written to the journal file, without fsync), ``true`` (fsync before the ack, as
``magnetar bookie`` does by default) or ``both`` (one standalone each, one row each).

The same client runs against ``benchmarks/null_broker.py`` (codec only, acks at
once, nothing stored): the ratio real/null says how much of the client's
ceiling on this machine the real broker reaches.  Figures, never pass/fail.

    .venv/bin/python benchmarks/e2e_bench.py [--messages 50000] [--latency-seconds 5] [--skip-null]
        [--journal-sync-data false|true|both]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pulsar

from magnetar.testing.standalone import StandaloneProcess

SIZE_BYTES = 1024
LATENCY_RATE = 5000
IDLE_CPU_WINDOW_S = 5.0
_TS = struct.Struct(">d")


def _client(url: str) -> pulsar.Client:
    # the C++ console logger (a Python logger called from C++ threads can abort at exit)
    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def publish(client: pulsar.Client, topic: str, n: int, batching: bool) -> float:
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_publish_delay_ms=1,
        batching_max_messages=1000,
        max_pending_messages=5000 if batching else 1000,
        block_if_queue_full=True,
    )
    payload = b"x" * SIZE_BYTES
    # No per-message Python callback: it would take the GIL once per message and measure
    # that instead of the broker.  Delivery is checked by the backlog consume that follows.
    t0 = time.perf_counter()
    for _ in range(n):
        producer.send_async(payload, None)
    producer.flush()
    elapsed = time.perf_counter() - t0
    producer.close()
    return n / elapsed


def consume_backlog(consumer, n: int) -> float:
    t0 = time.perf_counter()
    got = 0
    while got < n:
        try:
            msg = consumer.receive(timeout_millis=10_000)
        except pulsar.Timeout:
            break
        consumer.acknowledge(msg)
        got += 1
    elapsed = time.perf_counter() - t0
    if got < n:
        print(f"  warning: consumed only {got} of {n}", file=sys.stderr)
    return got / elapsed


def latency(client: pulsar.Client, topic: str, seconds: float) -> dict[str, float]:
    consumer = client.subscribe(topic, "lat", receiver_queue_size=1000)
    # A broker stall must show up as latency, not as sends the client drops because its queue
    # is full (send_async fails at once then): a deep queue that blocks when full.
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=1,
        max_pending_messages=10_000,
        block_if_queue_full=True,
    )
    total = int(LATENCY_RATE * seconds)
    failed: list[object] = []

    def on_sent(res, _mid) -> None:
        if res != pulsar.Result.Ok:
            failed.append(res)

    samples: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while len(samples) < total:
            try:
                msg = consumer.receive(timeout_millis=5_000)
            except pulsar.Timeout:
                break
            samples.append((time.perf_counter() - _TS.unpack_from(msg.data())[0]) * 1000.0)
            consumer.acknowledge(msg)
        done.set()

    rx = threading.Thread(target=receive, daemon=True)
    rx.start()
    pad = b"l" * (SIZE_BYTES - _TS.size)
    t0 = time.perf_counter()
    for i in range(total):
        delay = t0 + i / LATENCY_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.send_async(_TS.pack(time.perf_counter()) + pad, on_sent)
    producer.flush()
    done.wait(30)
    producer.close()
    consumer.close()
    s = sorted(samples)

    def pct(p: float) -> float:
        return s[min(len(s) - 1, int(p / 100.0 * len(s)))] if s else float("nan")

    if failed:
        print(f"  warning: {len(failed)} latency-run sends failed ({failed[0]})", file=sys.stderr)
    return {"p50": pct(50), "p99": pct(99), "p99.9": pct(99.9), "received": len(s), "expected": total}


def run_suite(url: str, messages: int, latency_seconds: float) -> dict[str, object]:
    client = _client(url)
    tag = f"{os.getpid()}-{int(time.time())}"
    backlog_topic = f"persistent://public/default/bench-batched-{tag}"
    backlog = client.subscribe(backlog_topic, "backlog", receiver_queue_size=1000)
    out: dict[str, object] = {}
    out["publish_batched_msg_s"] = publish(client, backlog_topic, messages, batching=True)
    out["publish_unbatched_msg_s"] = publish(
        client, f"persistent://public/default/bench-unbatched-{tag}", max(1000, messages // 5), batching=False
    )
    out["consume_backlog_msg_s"] = consume_backlog(backlog, messages)
    backlog.close()
    out["latency_ms"] = latency(client, f"persistent://public/default/bench-latency-{tag}", latency_seconds)
    client.close()
    return out


def start_null_broker() -> tuple[subprocess.Popen[bytes], str]:
    here = Path(__file__).with_name("null_broker.py")
    proc = subprocess.Popen([sys.executable, str(here)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.search(r"(pulsar://\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"null broker did not start: {line!r}")
    return proc, m.group(1)


def fmt(results: dict[str, object]) -> list[str]:
    lat = results["latency_ms"]
    assert isinstance(lat, dict)
    return [
        f"{results['publish_batched_msg_s']:>12,.0f}",
        f"{results['publish_unbatched_msg_s']:>12,.0f}",
        f"{results['consume_backlog_msg_s']:>12,.0f}",
        f"{lat['p50']:>8.2f} / {lat['p99']:>7.2f} / {lat['p99.9']:>7.2f}  ({lat['received']:.0f}/{lat['expected']:.0f})",
    ]


def median_of(runs: list[dict[str, object]]) -> dict[str, object]:
    """Figure by figure, the median over repeated runs (a shared machine is noisy)."""
    out: dict[str, object] = {}
    for key, first in runs[0].items():
        if isinstance(first, dict):
            out[key] = median_of([r[key] for r in runs])  # type: ignore[misc]
        else:
            out[key] = statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]
    return out


def run_standalone(args: argparse.Namespace, sync: bool) -> tuple[dict[str, object], str]:
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-") as tmp:
        conf = Path(tmp) / "standalone.conf"
        extra = Path(args.config).read_text() if args.config else ""
        conf.write_text(f"{extra}\njournalSyncData={'true' if sync else 'false'}\n")
        sa = StandaloneProcess(Path(tmp) / "data", config_file=conf)
        sa.start()
        try:
            time.sleep(2.0)  # let start-up work settle before measuring idle memory
            ps = psutil.Process(sa.pid)
            idle_rss_mb = ps.memory_info().rss / (1024 * 1024)
            c0 = ps.cpu_times()
            time.sleep(IDLE_CPU_WINDOW_S)
            c1 = ps.cpu_times()
            idle_cpu_pct = ((c1.user - c0.user) + (c1.system - c0.system)) / IDLE_CPU_WINDOW_S * 100
            real = median_of(
                [run_suite(sa.broker_url, args.messages, args.latency_seconds) for _ in range(args.repeat)]
            )
            busy_rss_mb = psutil.Process(sa.pid).memory_info().rss / (1024 * 1024)
        finally:
            code = sa.terminate()
    line = (
        f"standalone (journalSyncData={str(sync).lower()}) startup-to-ready: {sa.startup_seconds:.2f} s; idle RSS {idle_rss_mb:.0f} MiB; "
        f"idle CPU {idle_cpu_pct:.1f} %; "
        f"RSS after the run {busy_rss_mb:.0f} MiB; SIGTERM exit code {code}"
    )
    return real, line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="official pulsar-client against magnetar standalone and a null broker"
    )
    p.add_argument(
        "--messages", type=int, default=50_000, help="messages for the batched publish/consume runs"
    )
    p.add_argument("--latency-seconds", type=float, default=5.0, help="length of the 5,000 msg/s latency run")
    p.add_argument("--skip-null", action="store_true", help="do not run the null broker comparison")
    p.add_argument("--null-only", action="store_true", help="only the null broker (checks the harness)")
    p.add_argument("--repeat", type=int, default=1, help="runs per broker; each figure is the median")
    p.add_argument(
        "--journal-sync-data",
        choices=["false", "true", "both"],
        default="false",
        help="the standalone bookie's journalSyncData (default false, the standalone's default)",
    )
    p.add_argument("--config", default=None, help="standalone config file (e.g. with brokerInterceptors)")
    args = p.parse_args(argv)

    reals: dict[str, dict[str, object]] = {}
    startup_lines: list[str] = []
    if not args.null_only:
        modes = {"false": [False], "true": [True], "both": [False, True]}[args.journal_sync_data]
        for sync in modes:
            result, line = run_standalone(args, sync)
            reals[f"sync={str(sync).lower()}"] = result
            startup_lines.append(line)
    null = None
    if not args.skip_null:
        proc, url = start_null_broker()
        try:
            null = median_of(
                [run_suite(url, args.messages, args.latency_seconds) for _ in range(args.repeat)]
            )
        finally:
            proc.terminate()
            proc.wait(10)

    print(
        f"{SIZE_BYTES} B messages, {args.messages} batched, latency run {args.latency_seconds:g} s at 5,000 msg/s; "
        f"median of {args.repeat} run(s) per broker"
    )
    for line in startup_lines:
        print(line)
    header = [
        "publish batched msg/s",
        "publish unbatched msg/s",
        "consume backlog msg/s",
        "e2e latency ms p50/p99/p99.9 @5k/s",
    ]
    print(f"{'':14}" + " | ".join(f"{h:>12}" for h in header))
    for name, result in reals.items():
        print(f"{'magnetar ' + name:14}" + " | ".join(fmt(result)))
    if null is not None:
        print(f"{'null broker':14}" + " | ".join(fmt(null)))
    for name, result in reals.items() if null is not None else ():
        assert null is not None
        ratios = [
            result[k] / null[k]  # type: ignore[operator]
            for k in ("publish_batched_msg_s", "publish_unbatched_msg_s", "consume_backlog_msg_s")
        ]
        print(f"{name + '/null':14}" + " | ".join(f"{r:>12.0%}" for r in ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
