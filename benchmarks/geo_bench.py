"""Geo-replication: throughput and delay from a publish in cluster A to its receipt in cluster B.

Starts a ZooKeeper (the shared configuration store) and two real ``magnetar standalone``
processes, A and B, on loopback; creates a tenant and a namespace replicated to both; then

1. *fixed rate*: the official ``pulsar-client`` publishes ``--rate`` messages/s of
   ``--size`` bytes in A for ``--seconds`` seconds while a consumer in B receives them.
   Delay = receive time in B - the message's publish time (both on this machine's clock,
   which is what a replicated message keeps); printed as p50/p95/p99/max, plus the rate
   received in B;
   The same messages consumed in A give the baseline (publish to receive without replication);
2. *burst*: ``--burst`` messages published as fast as the client can (batching on) in A;
   replication throughput = messages / (time of the last receipt in B - first publish).

Figures, never pass/fail.  On a shared 2-core machine the numbers move a lot between runs.

    .venv/bin/python benchmarks/geo_bench.py [--rate 500] [--seconds 10] [--size 256] [--burst 20000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pulsar

from magnetar.testing.standalone import StandaloneProcess
from magnetar.testing.zookeeper import ZooKeeperServer


def http(method: str, url: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()


def start(tmp: Path, name: str, zk: str) -> StandaloneProcess:
    conf = tmp / f"{name}.conf"
    conf.write_text(f"clusterName={name}\nconfigurationMetadataStoreUrl={zk}\nfunctionsWorkerEnabled=false\n")
    proc = StandaloneProcess(tmp / f"data-{name}", config_file=conf, extra_args=["--no-functions-worker"])
    proc.start(timeout_s=120)
    return proc


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def fixed_rate(
    a: StandaloneProcess, b: StandaloneProcess, topic: str, rate: int, seconds: float, size: int
) -> None:
    ca, cb = pulsar.Client(a.broker_url), pulsar.Client(b.broker_url)
    consumer = cb.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest)
    local = ca.subscribe(topic, "local", initial_position=pulsar.InitialPosition.Earliest)
    producer = ca.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=1)
    total = int(rate * seconds)
    payload = b"x" * size
    delays: list[float] = []
    local_delays: list[float] = []

    def consume_local() -> None:  # the same messages in A: the baseline without replication
        while len(local_delays) < total:
            try:
                msg = local.receive(timeout_millis=30_000)
            except pulsar.Timeout:
                return
            local_delays.append(time.time() * 1000 - msg.publish_timestamp())
            local.acknowledge(msg)

    baseline = threading.Thread(target=consume_local)
    baseline.start()

    def produce() -> None:
        t0 = time.monotonic()
        for i in range(total):
            wait = t0 + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            producer.send_async(payload, None)
        producer.flush()

    worker = threading.Thread(target=produce)
    first = time.time()
    worker.start()
    last = first
    while len(delays) < total:
        try:
            msg = consumer.receive(timeout_millis=30_000)
        except pulsar.Timeout:
            break
        now = time.time()
        delays.append(now * 1000 - msg.publish_timestamp())
        consumer.acknowledge(msg)
        last = now
    worker.join()
    baseline.join()
    ms = delays
    print(f"fixed rate {rate} msg/s x {seconds:.0f} s, {size} B: received {len(delays)}/{total} in B, "
          f"{len(delays) / max(1e-9, last - first):.0f} msg/s")  # fmt: skip
    if ms:
        print(f"  delay A->B (ms): p50 {pct(ms, .5):.1f}  p95 {pct(ms, .95):.1f}  "
              f"p99 {pct(ms, .99):.1f}  max {max(ms):.1f}  mean {statistics.fmean(ms):.1f}")  # fmt: skip
    if local_delays:
        lm = local_delays
        print(f"  baseline A->A (ms): p50 {pct(lm, .5):.1f}  p95 {pct(lm, .95):.1f}  "
              f"p99 {pct(lm, .99):.1f}  max {max(lm):.1f}  mean {statistics.fmean(lm):.1f}")  # fmt: skip
    ca.close()
    cb.close()


def burst(a: StandaloneProcess, b: StandaloneProcess, topic: str, n: int, size: int) -> None:
    ca, cb = pulsar.Client(a.broker_url), pulsar.Client(b.broker_url)
    consumer = cb.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest,
                            receiver_queue_size=5000)  # fmt: skip
    producer = ca.create_producer(topic, batching_enabled=True, batching_max_messages=500,
                                  batching_max_publish_delay_ms=5, max_pending_messages=20_000)  # fmt: skip
    payload = b"y" * size
    t0 = time.monotonic()
    for _ in range(n):
        producer.send_async(payload, None)
    producer.flush()
    published = time.monotonic() - t0
    got = 0
    while got < n:
        try:
            msg = consumer.receive(timeout_millis=30_000)
        except pulsar.Timeout:
            break
        got += 1
        if got % 1000 == 0 or got == n:
            consumer.acknowledge_cumulative(msg)
    elapsed = time.monotonic() - t0
    print(f"burst {n} x {size} B: published in A in {published:.2f} s ({n / published:.0f} msg/s); "
          f"all {got} in B after {elapsed:.2f} s -> replication {got / elapsed:.0f} msg/s, "
          f"{got * size / elapsed / 1e6:.2f} MB/s")  # fmt: skip
    ca.close()
    cb.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--burst", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="geo-bench-") as tmp_s:
        tmp = Path(tmp_s)
        zk = ZooKeeperServer(str(tmp / "zk"))
        zk.start()
        procs: list[StandaloneProcess] = []
        try:
            url = f"zk:{zk.hosts}/geo-bench"
            a = start(tmp, "A", url)
            procs.append(a)
            b = start(tmp, "B", url)
            procs.append(b)
            http(
                "PUT",
                f"{a.web_url}/admin/v2/tenants/bench",
                {"adminRoles": [], "allowedClusters": ["A", "B"]},
            )
            http("PUT", f"{a.web_url}/admin/v2/namespaces/bench/geo", {"replication_clusters": ["A", "B"]})
            fixed_rate(
                a,
                b,
                f"persistent://bench/geo/rate-{uuid.uuid4().hex[:6]}",
                args.rate,
                args.seconds,
                args.size,
            )
            if args.burst:
                burst(a, b, f"persistent://bench/geo/burst-{uuid.uuid4().hex[:6]}", args.burst, args.size)
        finally:
            for p in procs:
                p.terminate()
            zk.close()


if __name__ == "__main__":
    main()
