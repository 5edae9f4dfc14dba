"""Consume-side figures: a pre-filled backlog read by the official client, base vs branch.

Theory of operation: for each source tree given (``--src``, default this
checkout's ``src``) a ``magnetar standalone`` is started from that tree (its
``src`` first on ``PYTHONPATH``), so two trees can be measured back to back in
the same minute on the same machine.  Per round and per tree:

* a subscription is created, then ``--messages`` 1 KB messages are published
  *unbatched* (one entry each) into the backlog, and the same subscription
  reads them with ``receive`` + ``acknowledge`` (individual acks, the client's
  default grouping): "consume backlog, unbatched";
* the same with a batching producer (1 ms, up to 1000 messages per entry):
  "consume backlog, batched";
* the broker's CPU share during each consume and its CPU time per message
  (psutil, user+system of the broker process): on a shared machine the rate
  swings with the load, the CPU per message much less;
* the same two figures for the publish that fills each backlog (official
  client, 1 KB, unbatched ``send_async`` / batched 1 ms): the publish path's
  broker CPU per message.

``--null`` adds the null broker (``benchmarks/null_broker.py``: the codec and
nothing else) as a ceiling for the same client.  Rounds interleave the trees
(A B A B ...) and the medians are printed with the load average.  The client,
publishing, backlog reading and the null broker's start are ``e2e_bench.py``'s.

    .venv/bin/python benchmarks/consume_bench.py [--src /tmp/base/src --src src]
        [--messages 50000] [--batched-messages 200000] [--rounds 3] [--null]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from e2e_bench import _client, _cpu, consume_backlog, start_null_broker
from e2e_bench import publish as fill

from magnetar.testing.standalone import StandaloneProcess

HERE = Path(__file__).resolve().parent


def consume(consumer, n: int, pid: int | None) -> tuple[float, float, float]:  # noqa: ANN001
    """(msg/s, broker CPU % over the run, broker CPU µs per message) reading ``n`` messages
    with individual acks.  On a shared machine the rate swings with the load; the broker's
    CPU time per message does not, so it is the figure to compare trees by."""
    proc = psutil.Process(pid) if pid else None
    c0 = _cpu(proc)
    t0 = time.perf_counter()
    rate = consume_backlog(consumer, n)
    elapsed = time.perf_counter() - t0
    cpu_s = _cpu(proc) - c0
    got = rate * elapsed
    return rate, cpu_s / elapsed * 100, cpu_s * 1e6 / max(got, 1)


def suite(url: str, pid: int | None, messages: int, batched_messages: int) -> dict[str, float]:
    client = _client(url)
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    out: dict[str, float] = {}
    for name, batching, n in (("unbatched", False, messages), ("batched", True, batched_messages)):
        topic = f"persistent://public/default/consume-{name}-{tag}"
        consumer = client.subscribe(topic, "bench", receiver_queue_size=1000)
        proc = psutil.Process(pid) if pid else None
        c0 = _cpu(proc)
        out[f"{name}_pub_msg_s"] = fill(client, topic, n, batching)
        out[f"{name}_pub_cpu_us_per_msg"] = (_cpu(proc) - c0) * 1e6 / n
        rate, cpu, us = consume(consumer, n, pid)
        consumer.close()
        out[f"{name}_msg_s"] = rate
        out[f"{name}_cpu_pct"] = cpu
        out[f"{name}_cpu_us_per_msg"] = us
    client.close()
    return out


def run_tree(src: Path, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="magnetar-cbench-") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(src)
        sa = StandaloneProcess(Path(tmp) / "data", env=env)
        sa.start()
        try:
            time.sleep(1.0)
            return suite(sa.broker_url, sa.pid, args.messages, args.batched_messages)
        finally:
            sa.terminate()


def run_null(args: argparse.Namespace) -> dict[str, float]:
    proc, url = start_null_broker()
    try:
        return suite(url, proc.pid, args.messages, args.batched_messages)
    finally:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", type=Path, help="a source tree's src dir (repeatable)")
    ap.add_argument("--messages", type=int, default=50_000, help="unbatched backlog size")
    ap.add_argument("--batched-messages", type=int, default=200_000, help="batched backlog size")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--null", action="store_true", help="also measure the null broker")
    args = ap.parse_args(argv)
    srcs = args.src or [HERE.parent / "src"]
    names = [str(s) for s in srcs] + (["null broker"] if args.null else [])
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for r in range(args.rounds):
        for s in srcs:
            runs[str(s)].append(run_tree(s, args))
            print(f"round {r + 1} {s}: {runs[str(s)][-1]}", flush=True)
        if args.null:
            runs["null broker"].append(run_null(args))
            print(f"round {r + 1} null: {runs['null broker'][-1]}", flush=True)
    print(f"\nmedians of {args.rounds}; load average {os.getloadavg()}")
    print(
        f"{'tree':<40} {'unbatched msg/s':>16} {'cpu%':>6} {'us/msg':>7} {'batched msg/s':>14} {'cpu%':>6} {'us/msg':>7}"
    )
    med: dict[str, dict[str, float]] = {}
    for n in names:
        med[n] = {k: statistics.median(r[k] for r in runs[n]) for k in runs[n][0]}
        m = med[n]
        print(
            f"{n[-40:]:<40} {m['unbatched_msg_s']:>16,.0f} {m['unbatched_cpu_pct']:>6.0f} "
            f"{m['unbatched_cpu_us_per_msg']:>7.1f} {m['batched_msg_s']:>14,.0f} {m['batched_cpu_pct']:>6.0f} "
            f"{m['batched_cpu_us_per_msg']:>7.1f}"
        )
    print(
        f"\npublish (the backlog fill) {'tree':<30} {'unbatched msg/s':>16} {'us/msg':>7} {'batched msg/s':>14} {'us/msg':>7}"
    )
    for n in names:
        m = med[n]
        print(
            f"{n[-40:]:<40} {m['unbatched_pub_msg_s']:>16,.0f} {m['unbatched_pub_cpu_us_per_msg']:>7.1f} "
            f"{m['batched_pub_msg_s']:>14,.0f} {m['batched_pub_cpu_us_per_msg']:>7.1f}"
        )
    if len(srcs) >= 2:
        a, b = med[str(srcs[0])], med[str(srcs[-1])]
        print(
            f"publish ratio last/first: broker CPU per message unbatched "
            f"{b['unbatched_pub_cpu_us_per_msg'] / a['unbatched_pub_cpu_us_per_msg']:.2f}x, batched "
            f"{b['batched_pub_cpu_us_per_msg'] / a['batched_pub_cpu_us_per_msg']:.2f}x"
        )
        print(
            f"ratio last/first: unbatched {b['unbatched_msg_s'] / a['unbatched_msg_s']:.2f}x, "
            f"batched {b['batched_msg_s'] / a['batched_msg_s']:.2f}x; broker CPU per message: unbatched "
            f"{b['unbatched_cpu_us_per_msg'] / a['unbatched_cpu_us_per_msg']:.2f}x, batched "
            f"{b['batched_cpu_us_per_msg'] / a['batched_cpu_us_per_msg']:.2f}x"
        )
    if args.null:
        nb = med["null broker"]
        for s in srcs:
            m = med[str(s)]
            print(
                f"{str(s)[-40:]}: batched / null = {m['batched_msg_s'] / nb['batched_msg_s']:.2f}, "
                f"unbatched / null = {m['unbatched_msg_s'] / nb['unbatched_msg_s']:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
