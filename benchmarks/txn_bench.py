"""Transactions: transactions per second, and what a transactional send costs over a plain one.

Starts one ``magnetar standalone`` subprocess with ``transactionCoordinatorEnabled=true``
(or uses ``--url``) and measures with ``magnetar.client``, sequentially (one thing in flight,
so the figures are latencies, not pipelined throughput):

* plain send latency: ``--sends`` unbatched sends, each awaited (p50 / p99);
* transactional send latency: the same sends inside one open transaction (the partition is
  added once, before the first; each send carries the id and is never batched);
* transactions/s, three shapes, ``--txns`` each: an empty transaction (NEW_TXN + END_TXN),
  produce-only (1 send + commit), and consume-transform-produce (receive, 1 send, 1
  transactional ack, commit) -- the last is what exactly-once processing costs per message.

    .venv/bin/python benchmarks/txn_bench.py [--url pulsar://...] [--sends N] [--txns N]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else float("nan")


def _topic(tag: str) -> str:
    return f"persistent://public/default/txnbench-{tag}-{uuid.uuid4().hex[:8]}"


async def _send_latencies(client, n: int, txn) -> list[float]:  # type: ignore[no-untyped-def]
    producer = await client.create_producer(_topic("lat"), batching_enabled=False)
    await producer.send(b"warm", txn=txn)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await producer.send(b"x" * 100, txn=txn)
        out.append((time.perf_counter() - t0) * 1000)
    await producer.close()
    return out


async def _txn_rate(client, n: int, shape: str) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    out_topic, in_topic = _topic("out"), _topic("in")
    producer = await client.create_producer(out_topic, batching_enabled=False)
    consumer = None
    if shape == "ctp":
        consumer = await client.subscribe(in_topic, "bench", initial_position="earliest")
        feeder = await client.create_producer(in_topic, batching_enabled=False)
        await asyncio.gather(*[await feeder.send_async(b"in") for _ in range(n)])
    lat = []
    t_start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        async with client.transaction(timeout=60) as txn:
            if shape == "ctp":
                assert consumer is not None
                msg = await consumer.receive(10_000)
                await producer.send(msg.data(), txn=txn)
                await consumer.acknowledge(msg, txn=txn)
            elif shape == "produce":
                await producer.send(b"y" * 100, txn=txn)
        lat.append((time.perf_counter() - t0) * 1000)
    return n / (time.perf_counter() - t_start), lat


async def run(url: str, sends: int, txns: int) -> None:
    from magnetar.client import Client

    client = Client(url, operation_timeout_seconds=30)
    try:
        plain = await _send_latencies(client, sends, None)
        txn = await client.transaction(timeout=600)
        in_txn = await _send_latencies(client, sends, txn)
        await txn.commit()
        print(f"send latency, {sends} sequential unbatched sends of 100 B (ms):")
        print(f"  plain          p50 {_pct(plain, 50):7.2f}  p99 {_pct(plain, 99):7.2f}")
        print(f"  transactional  p50 {_pct(in_txn, 50):7.2f}  p99 {_pct(in_txn, 99):7.2f}")
        print(f"  cost           p50 {_pct(in_txn, 50) - _pct(plain, 50):+7.2f}")
        print(f"transactions, {txns} sequential each:")
        for shape, label in (
            ("empty", "empty (new + commit)"),
            ("produce", "1 send + commit"),
            ("ctp", "receive + send + ack + commit"),
        ):
            rate, lat = await _txn_rate(client, txns, shape)
            print(
                f"  {label:32s} {rate:8.1f} txn/s   p50 {_pct(lat, 50):6.2f} ms  p99 {_pct(lat, 99):6.2f} ms"
            )
    finally:
        await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running broker with transactions enabled (default: start a standalone)")
    ap.add_argument("--sends", type=int, default=500)
    ap.add_argument("--txns", type=int, default=300)
    args = ap.parse_args()
    if args.url:
        asyncio.run(run(args.url, args.sends, args.txns))
        return
    from magnetar.testing.standalone import StandaloneProcess

    with tempfile.TemporaryDirectory() as d:
        conf = Path(d) / "txn.conf"
        conf.write_text("transactionCoordinatorEnabled=true\n")
        proc = StandaloneProcess(Path(d) / "data", config_file=conf)
        proc.start(timeout_s=120)
        try:
            asyncio.run(run(proc.broker_url, args.sends, args.txns))
        finally:
            proc.terminate()


if __name__ == "__main__":
    main()
