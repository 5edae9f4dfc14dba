"""End-to-end figures: the official client against ``magnetar standalone`` and against the null broker.

Theory of operation: every number comes from the official ``pulsar-client``
driving a broker in another process over loopback, as a user would see it:

* publish throughput, 1 KB messages, batched (``send_async`` + flush) and
  unbatched (``send_async``, one entry per message);
* consume throughput from a backlog, batched and unbatched (each publish
  run's messages, read by a subscription that existed before they were
  published);
* end-to-end latency at a paced 5,000 msg/s, batched and unbatched (the send
  time travels in the payload; the consumer in the same process subtracts it
  on receipt): p50 / p99 / p99.9;
* several producers: ``--producers N`` unbatched producers, one topic each,
  one thread each, at once (total msg/s, and its ratio to one producer: the
  issue's "use the second core" row);
* startup-to-ready seconds (spawn to the ready line), idle RSS and idle CPU;
* the broker's CPU per message (microseconds of the broker process and its
  children, all threads, per message published + consumed): steadier than
  msg/s on a shared machine;
* with ``--bookie``: the bookie alone (benchmarks/bookie_bench.py's cases):
  a lone writer with fsync (one add outstanding) next to the raw fdatasync
  latency of the same disk, and 64 outstanding adds.

``--journal-sync-data`` chooses the embedded bookie's ``journalSyncData``:
``false`` (the standalone's default, as Pulsar's: an add is acknowledged once
written to the journal file, without fsync), ``true`` (fsync before the ack, as
``magnetar bookie`` does by default) or ``both`` (one standalone each, one row each).

The same client runs against ``benchmarks/null_broker.py`` (codec only, acks at
once, nothing stored): the ratio real/null says how much of the client's
ceiling on this machine the real broker reaches.  Figures, never pass/fail.

    .venv/bin/python benchmarks/e2e_bench.py [--messages 50000] [--latency-seconds 5] [--skip-null]
        [--journal-sync-data false|true|both] [--producers 4] [--bookie] [--repeat 3]
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
    """Messages per second for ``n`` messages from one producer, until the last is acknowledged."""
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


def publish_many(client: pulsar.Client, topics: list[str], n_each: int) -> float:
    """Total msg/s of one unbatched producer per topic, each in its own thread, all at once."""
    producers = [
        client.create_producer(t, batching_enabled=False, max_pending_messages=1000, block_if_queue_full=True)
        for t in topics
    ]
    return race_producers(producers, n_each)


def race_producers(producers: list, n_each: int) -> float:  # type: ignore[type-arg]
    """``n_each`` unbatched 1 KB sends from every producer, each in its own thread, started
    together; total msg/s; closes the producers."""
    payload = b"x" * SIZE_BYTES
    start = threading.Barrier(len(producers) + 1)

    def run(producer) -> None:  # type: ignore[no-untyped-def]
        start.wait()
        for _ in range(n_each):
            producer.send_async(payload, None)
        producer.flush()

    threads = [threading.Thread(target=run, args=(p,)) for p in producers]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for p in producers:
        p.close()
    return n_each * len(producers) / elapsed


def latency(client: pulsar.Client, topic: str, seconds: float, batching: bool = True) -> dict[str, float]:
    consumer = client.subscribe(topic, "lat", receiver_queue_size=1000)
    # A broker stall must show up as latency, not as sends the client drops because its queue
    # is full (send_async fails at once then): a deep queue that blocks when full.
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
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


def run_suite(
    url: str, messages: int, latency_seconds: float, producers: int, pid: int | None = None
) -> dict[str, object]:
    """One run of every client-side row; ``pid``: the broker process, for its CPU per message."""
    client = _client(url)
    tag = f"{os.getpid()}-{int(time.time() * 1000)}"
    proc = psutil.Process(pid) if pid is not None else None
    cpu0 = _cpu(proc)
    out: dict[str, object] = {}
    batched_topic = f"persistent://public/default/bench-batched-{tag}"
    unbatched_topic = f"persistent://public/default/bench-unbatched-{tag}"
    unbatched_n = max(1000, messages // 5)
    backlog_b = client.subscribe(batched_topic, "backlog", receiver_queue_size=1000)
    backlog_u = client.subscribe(unbatched_topic, "backlog", receiver_queue_size=1000)
    out["publish_batched_msg_s"] = publish(client, batched_topic, messages, batching=True)
    out["publish_unbatched_msg_s"] = publish(client, unbatched_topic, unbatched_n, batching=False)
    out["consume_backlog_batched_msg_s"] = consume_backlog(backlog_b, messages)
    out["consume_backlog_unbatched_msg_s"] = consume_backlog(backlog_u, unbatched_n)
    backlog_b.close()
    backlog_u.close()
    handled = 2 * messages + 2 * unbatched_n
    if producers > 1:
        topics = [f"persistent://public/default/bench-multi-{tag}-{i}" for i in range(producers)]
        out["publish_unbatched_multi_msg_s"] = publish_many(client, topics, unbatched_n)
        handled += producers * unbatched_n
    cpu1 = _cpu(proc)
    out["broker_cpu_us_per_msg"] = (cpu1 - cpu0) / handled * 1e6 if proc is not None else float("nan")
    out["latency_batched_ms"] = latency(
        client, f"persistent://public/default/bench-latency-b-{tag}", latency_seconds, batching=True
    )
    out["latency_unbatched_ms"] = latency(
        client, f"persistent://public/default/bench-latency-u-{tag}", latency_seconds, batching=False
    )
    client.close()
    return out


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    """The broker process and its children (a bookie or worker process of the standalone counts
    as the broker's: the CPU per message and the RSS are the whole standalone's)."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _cpu(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    total = 0.0
    for p in _tree(proc):
        try:
            t = p.cpu_times()
        except psutil.Error:  # a child that exited meanwhile
            continue
        total += t.user + t.system
    return total


def _rss_mib(proc: psutil.Process) -> float:
    total = 0
    for p in _tree(proc):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total / (1024 * 1024)


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


THROUGHPUT_ROWS = [
    ("publish_batched_msg_s", "publish batched msg/s"),
    ("publish_unbatched_msg_s", "publish unbatched msg/s (1 producer)"),
    ("publish_unbatched_multi_msg_s", "publish unbatched msg/s (N producers, N topics)"),
    ("consume_backlog_batched_msg_s", "consume backlog batched msg/s"),
    ("consume_backlog_unbatched_msg_s", "consume backlog unbatched msg/s"),
]
LATENCY_ROWS = [
    ("latency_batched_ms", "e2e latency batched @5k/s ms p50/p99/p99.9"),
    ("latency_unbatched_ms", "e2e latency unbatched @5k/s ms p50/p99/p99.9"),
]


def print_table(columns: dict[str, dict[str, object]], null: dict[str, object] | None) -> None:
    """One row per figure, one column per broker, then each broker's ratio to the null broker."""
    cols = dict(columns)
    if null is not None:
        cols["null broker"] = null
    ratio_cols = [n for n in columns if null is not None]
    width = 48
    print(
        f"{'':{width}}"
        + "".join(f"{n:>24}" for n in cols)
        + "".join(f"{n + '/null':>16}" for n in ratio_cols)
    )
    for key, label in THROUGHPUT_ROWS:
        if not any(key in r for r in cols.values()):
            continue
        vals = "".join(f"{float(r.get(key, float('nan'))):>24,.0f}" for r in cols.values())  # type: ignore[arg-type]
        ratios = "".join(
            f"{float(columns[n].get(key, float('nan'))) / float(null.get(key, float('nan'))):>16.0%}"  # type: ignore[union-attr,arg-type]
            for n in ratio_cols
        )
        print(f"{label:{width}}" + vals + ratios)
    for key, label in LATENCY_ROWS:
        cells = []
        for r in cols.values():
            lat = r[key]
            assert isinstance(lat, dict)
            cells.append(f"{lat['p50']:.2f}/{lat['p99']:.2f}/{lat['p99.9']:.2f}")
        print(f"{label:{width}}" + "".join(f"{c:>24}" for c in cells))
    for key, label in (("broker_cpu_us_per_msg", "broker CPU us per message (pub+consume)"),):
        print(f"{label:{width}}" + "".join(f"{float(r[key]):>24.1f}" for r in cols.values()))  # type: ignore[arg-type]
    for name, r in cols.items():
        multi = r.get("publish_unbatched_multi_msg_s")
        if multi is not None:
            one = float(r["publish_unbatched_msg_s"])  # type: ignore[arg-type]
            print(f"{name}: N producers on N topics / one producer = {float(multi) / one:.2f}x")  # type: ignore[arg-type]


def bookie_rows(seconds: float) -> list[str]:
    """The bookie alone (in this process, uvloop): the lone writer and 64 outstanding, fsync on,
    next to the disk's raw fdatasync latency (benchmarks/bookie_bench.py)."""
    import uvloop

    sys.path.insert(0, str(Path(__file__).parent))
    import bookie_bench

    lines = []
    with tempfile.TemporaryDirectory(prefix="magnetar-bookie-bench-") as base:
        rate, p50 = bookie_bench.raw_fsync_rate(base, seconds, prealloc=True)
        lines.append(f"raw fdatasync (100 B into preallocated space): {rate:,.0f}/s, p50 {p50:.3f} ms")
        for conc in (1, 64):
            r = uvloop.run(
                bookie_bench.run_case(os.path.join(base, "data"), SIZE_BYTES, True, False, seconds, conc)
            )
            who = "lone writer (1 outstanding)" if conc == 1 else f"{conc} outstanding"
            lines.append(
                f"bookie adds, fsync on, {SIZE_BYTES} B, {who}: {r['adds_s']:,.0f}/s, p50 {r['p50_ms']:.3f} ms, "
                f"p99 {r['p99_ms']:.3f} ms, {r['adds_per_group']:.1f} adds/fsync, {r['cpu_us']:.0f} us CPU/add"
            )
    return lines


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
            idle_rss_mb = _rss_mib(ps)
            c0 = _cpu(ps)
            time.sleep(IDLE_CPU_WINDOW_S)
            idle_cpu_pct = (_cpu(ps) - c0) / IDLE_CPU_WINDOW_S * 100
            real = median_of(
                [
                    run_suite(sa.broker_url, args.messages, args.latency_seconds, args.producers, sa.pid)
                    for _ in range(args.repeat)
                ]
            )
            busy_rss_mb = _rss_mib(psutil.Process(sa.pid))
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
    p.add_argument(
        "--producers",
        type=int,
        default=4,
        help="producers (one topic each) for the multi-producer row; 1: skip",
    )
    p.add_argument(
        "--bookie", action="store_true", help="also the bookie alone: lone writer and 64 outstanding"
    )
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
                [
                    run_suite(url, args.messages, args.latency_seconds, args.producers, proc.pid)
                    for _ in range(args.repeat)
                ]
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
    print_table(reals, null)
    if args.bookie:
        for line in bookie_rows(2.0):
            print(line)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
