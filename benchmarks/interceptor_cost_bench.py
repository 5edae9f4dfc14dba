"""What the broker's interceptor hooks cost: broker CPU per message, with and without a no-op interceptor.

Theory of operation: throughput figures swing by 2x or more on a shared
2-core machine, so this benchmark measures what contention barely moves: the
CPU time (user + system) that the ``magnetar standalone`` process spends per
message while the official ``pulsar-client`` publishes N unbatched 1 KB
messages and then consumes and acknowledges them (every hook kind runs once
per message: command, publish, dispatch, ack).  Each configuration is a
label, a source tree (``PYTHONPATH``, so an older checkout can be measured
with the same script) and an optional config text; configurations run
interleaved, round after round, and the report gives per-configuration
medians of broker CPU us/msg and of the wall-clock msg/s.

    .venv/bin/python benchmarks/interceptor_cost_bench.py --rounds 5 --messages 20000 \
        --case main=src --case main+noop=src:brokerInterceptors=example-noop \
        --case pre-hooks=/path/to/old/checkout/src

The no-op interceptor is ``example-noop`` from ``tests/plugins`` (installed
into the test venv by ``.ci/run``).  Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

READY_RE = re.compile(r"^magnetar ready: (pulsar://\S+) (http://\S+)\s*$")


@dataclass
class Case:
    label: str
    src: Path
    config: str


def parse_case(text: str) -> Case:
    label, _, rest = text.partition("=")
    src, _, config = rest.partition(":")
    return Case(label, Path(src).resolve(), config.replace(";", "\n"))


def start(case: Case, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    conf = tmp / "standalone.conf"
    conf.write_text(case.config + "\n")
    env = dict(os.environ, PYTHONPATH=str(case.src))
    cmd = [sys.executable, "-m", "magnetar.cli.main", "standalone", "--data-dir", str(tmp / "data"),
           "--config", str(conf), "--broker-port", "0", "--web-port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line and proc.poll() is not None:
            raise RuntimeError(f"{case.label}: standalone exited with {proc.returncode}")
        m = READY_RE.match(line.strip())
        if m:
            # keep draining: a full stdout pipe would stall the broker being measured
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError(f"{case.label}: no ready line within 60 s")


def one_run(case: Case, messages: int) -> tuple[float, float]:
    import pulsar  # the official client; a test extra

    with tempfile.TemporaryDirectory(prefix="magnetar-icost-") as tmp:
        proc, url = start(case, Path(tmp))
        try:
            client = pulsar.Client(url, operation_timeout_seconds=30,
                                   logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
            topic = f"persistent://public/default/icost-{os.getpid()}-{time.time_ns()}"
            consumer = client.subscribe(topic, "icost", receiver_queue_size=1000)
            producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=2000,
                                              block_if_queue_full=True)
            payload = b"x" * 1024
            # warm-up, not measured
            for _ in range(500):
                producer.send_async(payload, None)
            producer.flush()
            for _ in range(500):
                consumer.acknowledge(consumer.receive(10_000))
            broker = psutil.Process(proc.pid)
            c0 = broker.cpu_times()
            t0 = time.perf_counter()
            for _ in range(messages):
                producer.send_async(payload, None)
            producer.flush()
            for _ in range(messages):
                consumer.acknowledge(consumer.receive(10_000))
            wall = time.perf_counter() - t0
            c1 = broker.cpu_times()
            client.close()
        finally:
            proc.terminate()
            proc.wait(30)
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    return cpu / messages * 1e6, messages / wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", action="append", required=True,
                   help="label=SRC[:config text, ';' separates lines]")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--messages", type=int, default=20_000)
    args = p.parse_args(argv)
    cases = [parse_case(c) for c in args.case]
    results: dict[str, list[tuple[float, float]]] = {c.label: [] for c in cases}
    for r in range(args.rounds):
        for case in cases:
            us, rate = one_run(case, args.messages)
            results[case.label].append((us, rate))
            print(f"round {r + 1} {case.label:>14}: broker CPU {us:7.1f} us/msg  {rate:8,.0f} msg/s", flush=True)
    print(f"\n{args.messages} unbatched 1 KB messages published then consumed+acked; medians of {args.rounds} rounds")
    base = statistics.median(u for u, _ in results[cases[0].label])
    for case in cases:
        us = statistics.median(u for u, _ in results[case.label])
        rate = statistics.median(x for _, x in results[case.label])
        print(f"{case.label:>14}: broker CPU {us:7.1f} us/msg ({us - base:+6.1f} vs {cases[0].label})  "
              f"{rate:8,.0f} msg/s (pub+consume)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
