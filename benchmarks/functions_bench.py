"""Pulsar Functions figures: records/s through an identity function, and the latency it adds.

Theory of operation: one ``magnetar standalone`` subprocess (with its functions
worker); the official ``pulsar-client`` in this process.  For each runtime
(``thread``: the instance in the worker process; ``process``: its own
subprocess) an identity function (``examples/functions/identity.py``, a plain
Python function) is deployed through the admin REST API with ``--custom-runtime-
options {"runtime": ...}``, then:

* throughput: ``--records`` small records are published with ``send_async``
  (batched) and the output topic is drained; records/s = records / (time from
  the first send to the last output received);
* latency: ``--latency-samples`` records one at a time (send, wait for the
  output): p50/p99 of the round trip, minus the same figure for a plain
  produce -> consume on one topic (the baseline without a function) = the
  latency the function adds.

Figures, never pass/fail.

    .venv/bin/python benchmarks/functions_bench.py [--records 20000] [--latency-samples 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pulsar

from magnetar.testing.standalone import StandaloneProcess

IDENTITY = Path(__file__).resolve().parents[1] / "examples" / "functions" / "identity.py"


def deploy(web_url: str, name: str, src: str, dst: str, runtime: str) -> None:
    config = {
        "className": "identity.identity", "inputs": [src], "output": dst,
        "customRuntimeOptions": json.dumps({"runtime": runtime}),
    }  # fmt: skip
    r = httpx.post(
        f"{web_url}/admin/v3/functions/public/default/{name}",
        files={"functionConfig": (None, json.dumps(config)), "data": ("identity.py", IDENTITY.read_bytes())},
        timeout=30,
    )
    r.raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = httpx.get(f"{web_url}/admin/v3/functions/public/default/{name}/status", timeout=10).json()
        if st["numRunning"] == 1:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not start: {st}")


def round_trips(client: pulsar.Client, src: str, dst: str, samples: int) -> list[float]:
    consumer = client.subscribe(dst, "bench-lat")
    producer = client.create_producer(src, batching_enabled=False)
    for _ in range(20):  # warm up connections and the instance
        producer.send(b"warm")
        consumer.acknowledge(consumer.receive(30000))
    out = []
    for i in range(samples):
        t0 = time.perf_counter()
        producer.send(f"l{i}".encode())
        msg = consumer.receive(30000)
        out.append((time.perf_counter() - t0) * 1000)
        consumer.acknowledge(msg)
    producer.close()
    consumer.close()
    return out


def throughput(client: pulsar.Client, src: str, dst: str, records: int) -> float:
    consumer = client.subscribe(dst, "bench-tput", receiver_queue_size=5000)
    producer = client.create_producer(
        src, batching_enabled=True, batching_max_publish_delay_ms=5, block_if_queue_full=True
    )
    t0 = time.perf_counter()
    for i in range(records):
        producer.send_async(f"r{i}".encode(), None)
    producer.flush()
    for _ in range(records):
        consumer.acknowledge(consumer.receive(60000))
    elapsed = time.perf_counter() - t0
    producer.close()
    consumer.close()
    return records / elapsed


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--latency-samples", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fn-bench-") as tmp:
        sa = StandaloneProcess(Path(tmp) / "data")
        sa.start()
        client = pulsar.Client(sa.broker_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            tag = uuid.uuid4().hex[:6]
            base = round_trips(client, f"base-{tag}", f"base-{tag}", args.latency_samples)
            print(
                f"baseline produce->consume round trip: p50 {pct(base, 50):.2f} ms  p99 {pct(base, 99):.2f} ms"
            )
            for runtime in ("thread", "process"):
                src, dst = f"in-{runtime}-{tag}", f"out-{runtime}-{tag}"
                deploy(sa.web_url, f"identity-{runtime}-{tag}", src, dst, runtime)
                lat = round_trips(client, src, dst, args.latency_samples)
                rate = throughput(client, src, dst, args.records)
                print(
                    f"{runtime:7s} runtime: {rate:8.0f} records/s through the function ({args.records} records); "
                    f"round trip p50 {pct(lat, 50):.2f} ms p99 {pct(lat, 99):.2f} ms; "
                    f"added p50 {pct(lat, 50) - pct(base, 50):.2f} ms p99 {pct(lat, 99) - pct(base, 99):.2f} ms"
                )
        finally:
            client.close()
            sa.terminate()


if __name__ == "__main__":
    main()
