"""magnetar.client (pure Python, asyncio) against the official client (C++ core), same broker, one run.

Starts one ``magnetar standalone`` subprocess (or uses ``--url``) and measures,
for each client in turn, on fresh topics:

* publish msg/s, batched (``--batched`` messages as fast as the producer
  accepts, 1000 pending, 1 ms batching delay) and unbatched (``--unbatched``
  messages);
* consume msg/s: a backlog of ``--batched`` messages read and acknowledged
  from the earliest position;
* end-to-end latency at a paced ``--rate`` msg/s (5,000 by default) for
  ``--seconds``, batched (``--lat-delay-ms``, 1 ms by default) and, with
  ``--lat-unbatched``, without batching: each payload carries its send time (``time.perf_counter``, same
  process), the consumer records receive time minus send time; p50 / p99 / max.
  The official run's sender sleeps with ``time.sleep``; magnetar.client's
  (``--pacing sleep``, the default) with ``asyncio.sleep`` when ahead of
  schedule (and yields at least once a millisecond when behind), which asyncio
  and uvloop round up to whole milliseconds, so its sends come in bursts of
  about ``rate/1000`` and each burst waits the whole batching delay (about 0.5
  ms more per message than evenly spaced sends). Neither run keeps a future
  per message: both wait for the last receipt (``flush``). ``--pacing thread`` wakes the
  loop from a thread paced like the official sender instead: even spacing,
  but one cross-thread wake-up and GIL hand-off per message, which on a
  loaded machine costs far more than it saves. ``--pacing both`` runs both.
  ``--rounds N`` repeats everything N times, each round running every client
  in turn, and prints medians, the ratios to the official client and the
  per-round p50s (the machine may be shared: compare within rounds).

magnetar.client runs on the standard asyncio loop and on uvloop (``--loop``).
Every figure comes from the same machine and broker within one run, so the
two columns can be compared; absolute values depend on the broker (which
writes every entry to its own storage) as much as on the clients.

    .venv/bin/python benchmarks/client_bench.py [--url pulsar://...] [--batched N] [--unbatched N]
        [--parts throughput,latency] [--rounds N] [--pacing sleep|thread|both] [--lat-delay-ms MS]
        [--rate R] [--seconds S] [--size BYTES]
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
import threading
import time
import uuid

_TS = struct.Struct(">d")


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def _topic(tag: str) -> str:
    return f"persistent://public/default/bench-{tag}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- official client
def official_run(url: str, args: argparse.Namespace) -> dict[str, float]:
    import pulsar

    client = pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    out: dict[str, float] = {}
    payload = b"x" * args.size

    def publish(topic: str, n: int, batching: bool) -> float:
        p = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=1,
                                   max_pending_messages=1000, block_if_queue_full=True)  # fmt: skip
        done = threading.Event()
        count = [0]

        def cb(res, _mid):
            count[0] += 1
            if count[0] == n:
                done.set()

        t0 = time.perf_counter()
        for _ in range(n):
            p.send_async(payload, cb)
        p.flush()
        done.wait(300)
        rate = n / (time.perf_counter() - t0)
        p.close()
        return rate

    if "throughput" in args.parts:
        topic = _topic("off-b")
        sub = client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest)
        out["publish batched msg/s"] = publish(topic, args.batched, True)
        out["publish unbatched msg/s"] = publish(_topic("off-u"), args.unbatched, False)
        t0 = time.perf_counter()
        for _ in range(args.batched):
            sub.acknowledge(sub.receive(10_000))
        out["consume msg/s"] = args.batched / (time.perf_counter() - t0)
        sub.close()
    if "latency" not in args.parts:
        client.close()
        return out

    for tag, delay_ms in _latency_modes(args):
        out.update(_lat(official_latency(client, args, delay_ms), tag))
    client.close()
    return out


def official_latency(client, args: argparse.Namespace, delay_ms: int) -> list[float]:
    """The official client's e2e latencies (ms) at ``args.rate`` msg/s, batching delay ``delay_ms`` (0: off)."""
    topic = _topic("off-l")
    payload = b"x" * args.size
    cons = client.subscribe(topic, "lat")
    prod = client.create_producer(
        topic,
        batching_enabled=delay_ms > 0,
        batching_max_publish_delay_ms=max(1, delay_ms),
        block_if_queue_full=True,
    )
    total = int(args.rate * args.seconds)
    lat: list[float] = []

    def receive_all() -> None:
        for _ in range(total):
            msg = cons.receive(10_000)
            lat.append((time.perf_counter() - _TS.unpack_from(msg.data())[0]) * 1000)
            cons.acknowledge(msg)

    rx = threading.Thread(target=receive_all)
    rx.start()
    t0 = time.perf_counter()
    for i in range(total):
        delay = t0 + i / args.rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        prod.send_async(_TS.pack(time.perf_counter()) + payload[8:], None)
    prod.flush()
    rx.join(120)
    prod.close()
    cons.close()
    return lat


def _latency_modes(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(label, batching delay ms): batched with ``--lat-delay-ms`` and, with ``--lat-unbatched``, unbatched."""
    modes = [("batched", args.lat_delay_ms)] if args.lat_delay_ms > 0 else []
    if args.lat_unbatched or not modes:
        modes.append(("unbatched", 0))
    return modes


def _lat(lat: list[float], tag: str) -> dict[str, float]:
    return {
        f"e2e p50 ms {tag}": _pct(lat, 50),
        f"e2e p99 ms {tag}": _pct(lat, 99),
        f"e2e max ms {tag}": max(lat) if lat else 0.0,
    }


# --------------------------------------------------------------------------- magnetar.client
async def native_run(url: str, args: argparse.Namespace, pacing: str = "sleep") -> dict[str, float]:
    from magnetar.client import Client

    client = Client(url, operation_timeout_seconds=30)
    out: dict[str, float] = {}
    payload = b"x" * args.size

    async def publish(topic: str, n: int, batching: bool) -> float:
        p = await client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=1,
                                         max_pending_messages=1000, block_if_queue_full=True)  # fmt: skip
        t0 = time.perf_counter()
        for _ in range(n):
            await p.send_async(payload)
        await p.flush()  # every receipt in (as the official run's callback count); no future kept
        rate = n / (time.perf_counter() - t0)
        await p.close()
        return rate

    if "throughput" in args.parts:
        topic = _topic("nat-b")
        sub = await client.subscribe(topic, "bench", initial_position="earliest")
        out["publish batched msg/s"] = await publish(topic, args.batched, True)
        out["publish unbatched msg/s"] = await publish(_topic("nat-u"), args.unbatched, False)
        t0 = time.perf_counter()
        for _ in range(args.batched):
            await sub.acknowledge(await sub.receive(10_000))
        out["consume msg/s"] = args.batched / (time.perf_counter() - t0)
        await sub.close()
    if "latency" not in args.parts:
        await client.close()
        return out

    for tag, delay_ms in _latency_modes(args):
        out.update(_lat(await native_latency(client, args, delay_ms, pacing), tag))
    await client.close()
    return out


async def native_latency(client, args: argparse.Namespace, delay_ms: int, pacing: str) -> list[float]:
    """magnetar.client's e2e latencies (ms) at ``args.rate`` msg/s, batching delay ``delay_ms`` (0: off)."""
    topic = _topic("nat-l")
    payload = b"x" * args.size
    cons = await client.subscribe(topic, "lat")
    prod = await client.create_producer(
        topic,
        batching_enabled=delay_ms > 0,
        batching_max_publish_delay_ms=max(1, delay_ms),
        block_if_queue_full=True,
    )
    total = int(args.rate * args.seconds)
    lat: list[float] = []

    async def receive_all() -> None:
        for _ in range(total):
            msg = await cons.receive(10_000)
            lat.append((time.perf_counter() - _TS.unpack_from(msg.data())[0]) * 1000)
            await cons.acknowledge(msg)

    rx = asyncio.create_task(receive_all())
    if pacing == "sleep":
        t0 = yielded = time.perf_counter()
        for i in range(total):
            now = time.perf_counter()
            delay = t0 + i / args.rate - now
            if delay > 0:
                await asyncio.sleep(delay)
                yielded = time.perf_counter()
            elif now - yielded > 0.001:  # behind schedule: still let the receiver run every ms
                await asyncio.sleep(0)
                yielded = time.perf_counter()
            await prod.send_async(_TS.pack(time.perf_counter()) + payload[8:])
    else:
        loop = asyncio.get_running_loop()
        due = [0]
        waiter: list[asyncio.Future[None] | None] = [None]

        def tick() -> None:  # on the loop: one more message is due
            due[0] += 1
            w = waiter[0]
            if w is not None and not w.done():
                w.set_result(None)

        def pacer() -> None:  # the official run's pacing (time.sleep), waking the loop at each due time
            t0 = time.perf_counter()
            for i in range(total):
                delay = t0 + i / args.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                loop.call_soon_threadsafe(tick)

        threading.Thread(target=pacer, daemon=True).start()
        for i in range(total):
            while due[0] <= i:
                waiter[0] = loop.create_future()
                await waiter[0]
            await prod.send_async(_TS.pack(time.perf_counter()) + payload[8:])
    await prod.flush()  # as the official run: no future kept per message
    await asyncio.wait_for(rx, 120)
    await prod.close()
    await cons.close()
    return lat


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _one_round(url: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    results = {"official (C++ core)": official_run(url, args)}
    pacings = ["sleep", "thread"] if args.pacing == "both" else [args.pacing]
    for pacing in pacings:
        tag = "" if pacing == "sleep" else " thread-paced"
        if args.loop in ("asyncio", "both"):
            results["magnetar.client asyncio" + tag] = asyncio.run(native_run(url, args, pacing))
        if args.loop in ("uvloop", "both"):
            import uvloop

            results["magnetar.client uvloop" + tag] = uvloop.run(native_run(url, args, pacing))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="broker service URL (default: start a standalone)")
    ap.add_argument("--batched", type=int, default=50_000)
    ap.add_argument("--unbatched", type=int, default=5_000)
    ap.add_argument("--rate", type=float, default=5_000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument(
        "--loop", choices=("uvloop", "asyncio", "both"), default="both", help="magnetar.client's loop"
    )
    ap.add_argument(
        "--pacing",
        choices=("thread", "sleep", "both"),
        default="sleep",
        help="latency sender of magnetar.client: asyncio.sleep (rounded up to whole ms by the loop), or a "
        "thread paced as the official run's (time.sleep) waking the loop at each due time",
    )
    ap.add_argument(
        "--lat-delay-ms", type=int, default=1, help="batching delay of the latency runs (0: no batching)"
    )
    ap.add_argument(
        "--lat-unbatched", action="store_true", help="also measure latency without batching (after batched)"
    )
    ap.add_argument("--parts", default="throughput,latency", help="throughput, latency or both (comma list)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="rounds, each running every client in turn; medians printed"
    )
    args = ap.parse_args()
    args.parts = set(args.parts.split(","))
    proc = None
    url = args.url
    if url is None:
        from magnetar.testing.standalone import StandaloneProcess

        proc = StandaloneProcess(tempfile.mkdtemp(prefix="client-bench-") + "/data")
        proc.start()
        url = proc.broker_url
    rounds: list[dict[str, dict[str, float]]] = []
    try:
        for _ in range(args.rounds):
            rounds.append(_one_round(url, args))
    finally:
        if proc is not None:
            proc.terminate()
    clients = list(rounds[0])
    results = {c: {k: _median([r[c][k] for r in rounds]) for k in rounds[0][c]} for c in clients}
    names = list(results[clients[0]])
    official = results[clients[0]]
    print(f"{args.size}-byte messages; e2e at {args.rate:g} msg/s for {args.seconds:g} s; broker {url}")
    if args.rounds > 1:
        print(
            f"medians of {args.rounds} rounds (each round runs the clients in turn); ratio = client / official"
        )
    print(f"{'':26}" + "".join(f"{k:>38}" for k in results))
    for name in names:
        print(f"{name:26}" + "".join(f"{r[name]:>38,.1f}" for r in results.values()))
    for c in clients[1:]:
        ratios = ", ".join(f"{n} {results[c][n] / official[n]:.2f}" for n in names if official[n])
        print(f"ratio {c}: {ratios}")
    if args.rounds > 1:
        for c in clients:
            for n in names:
                if n.startswith("e2e p50") or n.startswith("e2e p99"):
                    print(f"{c} {n} per round: " + " ".join(f"{r[c][n]:.1f}" for r in rounds))


if __name__ == "__main__":
    main()
