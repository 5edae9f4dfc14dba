"""Compaction end to end: a ``magnetar standalone`` subprocess, the official client, REST.

Writes --messages updates over --keys keys with the official client (batched),
then times ``PUT .../compaction`` until ``GET .../compaction`` says SUCCESS
(the REST status is polled every 10 ms, so figures under ~50 ms are coarse),
and a read_compacted reader reading the whole compacted view.  Prints figures;
asserts nothing about speed.

    .venv/bin/python benchmarks/compaction_rest_bench.py [--messages N] [--keys K]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pulsar

from magnetar.testing.standalone import StandaloneProcess


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=1_000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc = StandaloneProcess(Path(tmp) / "data")
        proc.start()
        try:
            run(proc, args.messages, args.keys)
        finally:
            proc.terminate()


def run(proc: StandaloneProcess, n: int, keys: int) -> None:
    local = f"bench-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    path = f"/admin/v2/persistent/public/default/{local}/compaction"
    client = pulsar.Client(proc.broker_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    producer = client.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
    t0 = time.perf_counter()
    for i in range(n):
        producer.send_async(f"value-{i}".encode() * 4, None, partition_key=f"k{i % keys}")
    producer.flush()
    produce_s = time.perf_counter() - t0
    with httpx.Client(base_url=proc.web_url, timeout=60) as http:
        t0 = time.perf_counter()
        assert http.put(path).status_code == 204
        while (status := http.get(path).json())["status"] == "RUNNING":
            time.sleep(0.01)
        compact_s = time.perf_counter() - t0
        assert status["status"] == "SUCCESS", status
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    t0 = time.perf_counter()
    got = 0
    while reader.has_message_available():
        reader.read_next(10_000)
        got += 1
    view_s = time.perf_counter() - t0
    client.close()
    print(f"{n} messages over {keys} keys (official client, batched), standalone subprocess")
    print(f"produce       {n / produce_s:>10,.0f} msg/s  ({produce_s:.2f} s)")
    print(f"compact REST  {n / compact_s:>10,.0f} msg/s  (PUT -> SUCCESS {compact_s:.2f} s)")
    print(f"view          {got / view_s:>10,.0f} msg/s  ({got} latest values read in {view_s:.2f} s)")


if __name__ == "__main__":
    main()
