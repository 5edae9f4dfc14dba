"""Where the memory of an idle topic and of an idle subscription goes (in-process).

Starts an in-process standalone (``magnetar.testing.standalone.running_standalone``,
inactive-topic deletion off), creates ``--topics`` persistent topics, then one durable
subscription (cursor) on each, either directly (``BrokerService.create_non_partitioned_topic``
and ``ManagedLedger.open_cursor``) or through the admin REST API of the same process
(``--rest``, as ``pulsar-admin`` does).  After each phase it prints the RSS delta per item,
the live Python objects per item by type (``gc``), and -- with ``--tracemalloc`` -- the
largest allocation sites per item (a snapshot diff).  ``topic_memory_bench.py`` is the
black-box figure (a real subprocess); this one says which objects make it up.

    .venv/bin/python benchmarks/topic_memory_inproc.py --topics 3000 --tracemalloc
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _rss import rss_bytes as rss  # noqa: E402 -- benchmarks/_rss.py, beside this script

from magnetar.managed_ledger.api import InitialPosition  # noqa: E402
from magnetar.testing.standalone import running_standalone  # noqa: E402


def type_counts() -> collections.Counter[str]:
    gc.collect()
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


def object_ids() -> set[int]:
    gc.collect()
    return {id(o) for o in gc.get_objects()}


def new_object_sizes(before: set[int], n: int, top: int) -> str:
    """Bytes per item of the gc-tracked objects made since ``before``, by type (an instance
    dict counted under its owner's type as ``Type.__dict__``)."""
    gc.collect()
    sizes: collections.Counter[str] = collections.Counter()
    dict_ids = set()
    objs = [o for o in gc.get_objects() if id(o) not in before]
    for o in objs:
        d = getattr(o, "__dict__", None) if not isinstance(o, type) else None
        if isinstance(d, dict) and id(d) not in before:
            sizes[type(o).__qualname__ + ".__dict__"] += sys.getsizeof(d)
            dict_ids.add(id(d))
    for o in objs:
        if id(o) not in dict_ids:
            sizes[type(o).__qualname__] += sys.getsizeof(o)
    total = sum(sizes.values())
    rows = ", ".join(f"{k} {v / n:.0f}" for k, v in sizes.most_common(top))
    return f"gc-tracked bytes per item {total / n:.0f}: {rows}"


async def run_all(coros, concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(c):
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


class Phase:
    def __init__(self, args) -> None:
        self.args = args

    def begin(self) -> None:
        gc.collect()
        self.types = type_counts()
        self.ids = object_ids() if self.args.sizes else None
        self.snap = tracemalloc.take_snapshot() if self.args.tracemalloc else None
        self.rss = rss()
        self.t0 = time.perf_counter()

    async def end(self, what: str, n: int) -> None:
        dt = time.perf_counter() - self.t0
        await asyncio.sleep(self.args.settle_s)
        gc.collect()
        delta = rss() - self.rss
        print(f"\n== {n} {what}: {dt:.1f} s, RSS +{delta / 1024 / 1024:.1f} MiB = {delta / n / 1024:.2f} KiB each")
        after = type_counts()
        diff = [(k, (after[k] - self.types.get(k, 0)) / n) for k in after]
        diff = sorted((d for d in diff if abs(d[1]) >= 0.5), key=lambda d: -d[1])
        print("objects per item: " + ", ".join(f"{k} {v:.1f}" for k, v in diff[: self.args.top]))
        if self.ids is not None:
            print(new_object_sizes(self.ids, n, self.args.top))
        if self.snap is not None:
            snap = tracemalloc.take_snapshot()
            stats = snap.compare_to(self.snap, "lineno")
            total = sum(s.size_diff for s in stats)
            print(f"tracemalloc: {total / n:.0f} B of Python objects per item; top sites (B per item):")
            for s in stats[: self.args.top]:
                fr = s.traceback[0]
                name = fr.filename.split("/src/")[-1].split("site-packages/")[-1]
                print(f"  {s.size_diff / n:8.1f}  {s.count_diff / n:6.2f}  {name}:{fr.lineno}")


async def main_async(args) -> None:
    n = args.topics
    with tempfile.TemporaryDirectory(prefix="topic-memory-inproc-") as tmp:
        async with running_standalone(tmp, {"brokerDeleteInactiveTopicsEnabled": "false"}) as sa:
            svc = sa.broker_service
            names = [f"persistent://public/default/mem-{i}" for i in range(n)]
            http = None
            if args.rest:
                import httpx

                async def put(path: str) -> None:
                    for attempt in range(3):
                        try:
                            r = await http.put(path)
                            break
                        except httpx.TransportError:  # a kept-alive connection the server closed
                            if attempt == 2:
                                raise
                    if r.status_code not in (204, 409):
                        raise RuntimeError(f"PUT {path}: {r.status_code} {r.text}")

                limits = httpx.Limits(max_connections=args.concurrency)
                http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{sa.web_port}", timeout=60, limits=limits)
                await http.get("/admin/v2/clusters")  # admin routes built
            await asyncio.sleep(1.0)
            if args.warmup:
                warm = [f"persistent://public/default/warm-{i}" for i in range(args.warmup)]
                await run_all((svc.create_non_partitioned_topic(w) for w in warm), args.concurrency)
            ph = Phase(args)
            if args.tracemalloc:
                tracemalloc.start(args.frames)
            ph.begin()
            if http is not None:
                paths = [f"/admin/v2/persistent/public/default/mem-{i}" for i in range(n)]
                await run_all((put(p) for p in paths), args.concurrency)
            else:
                await run_all((svc.create_non_partitioned_topic(t) for t in names), args.concurrency)
            await ph.end("topics", n)
            if args.no_subscriptions:
                return
            ph.begin()
            if http is not None:
                await run_all((put(f"{p}/subscription/sub") for p in paths), args.concurrency)
            else:

                async def sub(name: str) -> None:
                    await svc.topics.get_loaded(name).ml.open_cursor("sub", InitialPosition.LATEST)

                await run_all((sub(t) for t in names), args.concurrency)
            await ph.end("subscriptions", n)
            if http is not None:
                await http.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=200, help="topics created before measuring (caches, arenas)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--settle-s", type=float, default=3.0)
    ap.add_argument("--rest", action="store_true", help="through the admin REST API (in this process)")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--frames", type=int, default=1)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sizes", action="store_true", help="bytes of new gc-tracked objects by type")
    ap.add_argument("--no-subscriptions", action="store_true")
    args = ap.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
