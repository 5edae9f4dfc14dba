"""Memory per idle topic and per idle subscription of a real `magnetar standalone`.

Starts the standalone (inactive-topic deletion off, so idle topics stay loaded), then
through the admin REST API (as ``pulsar-admin topics create`` / ``create-subscription``):

1. creates ``--topics`` non-partitioned persistent topics -> RSS delta / count = bytes per
   idle topic (its managed ledger, first ledger, topic object, metadata cache entries);
2. creates one durable subscription on each -> RSS delta / count = bytes per idle
   subscription (cursor, its ledger/metadata, subscription and dispatcher objects).

RSS is read from /proc after the process has been quiet for ``--settle-s`` seconds; a
Python process keeps freed memory in its arenas, so this is an upper bound, which is what
an operator sees.  The idle CPU (% of one core) over ``--settle-s`` (10 s) is printed
too: per-topic timers or tasks of idle topics show up there.  The goal (issue 15) is < 10 KB each.

    .venv/bin/python benchmarks/topic_memory_bench.py [--topics 10000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _rss import settle  # noqa: E402 -- benchmarks/_rss.py, beside this script

from magnetar.testing.standalone import StandaloneProcess  # noqa: E402


async def create_all(web_url: str, paths: list[str], concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=web_url, timeout=60, limits=limits) as http:

        async def put(path: str) -> None:
            async with sem:
                for attempt in range(3):
                    try:
                        r = await http.put(path)
                        break
                    except httpx.TransportError:  # a kept-alive connection the server closed
                        if attempt == 2:
                            raise
                if r.status_code not in (204, 409):
                    raise RuntimeError(f"PUT {path}: {r.status_code} {r.text}")

        t0 = time.perf_counter()
        await asyncio.gather(*(put(p) for p in paths))
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--settle-s", type=float, default=10.0, help="quiet time before RSS; idle CPU is over it")
    ap.add_argument("--no-subscriptions", action="store_true", help="topics only (idle CPU, per topic)")
    ap.add_argument("--malloc-arena-max", type=int, default=0, help="MALLOC_ARENA_MAX for the standalone")
    args = ap.parse_args()
    n = args.topics
    with tempfile.TemporaryDirectory(prefix="topic-memory-bench-") as tmp:
        conf = Path(tmp) / "standalone.conf"
        conf.write_text("brokerDeleteInactiveTopicsEnabled=false\n")
        env = dict(os.environ)
        if args.malloc_arena_max:
            env["MALLOC_ARENA_MAX"] = str(args.malloc_arena_max)
        sa = StandaloneProcess(Path(tmp) / "data", config_file=conf, env=env)
        sa.start()
        try:
            base, base_cpu = settle(sa.pid, args.settle_s)
            topics = [f"/admin/v2/persistent/public/default/mem-{i}" for i in range(n)]
            t_topics = asyncio.run(create_all(sa.web_url, topics, args.concurrency))
            with_topics, topics_cpu = settle(sa.pid, args.settle_s)
            t_subs, with_subs, subs_cpu = 0.0, with_topics, topics_cpu
            if not args.no_subscriptions:
                subs = [f"{t}/subscription/sub" for t in topics]
                t_subs = asyncio.run(create_all(sa.web_url, subs, args.concurrency))
                with_subs, subs_cpu = settle(sa.pid, args.settle_s)
        except BaseException:
            print(sa.log_tail(), file=sys.stderr)
            raise
        finally:
            code = sa.terminate()
    mib = 1024 * 1024
    per_topic = (with_topics - base) / n
    per_sub = (with_subs - with_topics) / n
    print(f"idle standalone: RSS {base / mib:.1f} MiB, idle CPU {base_cpu:.1f} %")
    print(
        f"{n} topics created in {t_topics:.1f} s: RSS {with_topics / mib:.1f} MiB, "
        f"{per_topic / 1024:.1f} KiB per idle topic; idle CPU {topics_cpu:.1f} %"
    )
    if not args.no_subscriptions:
        print(
            f"{n} subscriptions created in {t_subs:.1f} s: RSS {with_subs / mib:.1f} MiB, "
            f"{per_sub / 1024:.1f} KiB per idle subscription; idle CPU {subs_cpu:.1f} %"
        )
    print(f"goal (issue 15): < 10 KiB each; SIGTERM exit code {code}")


if __name__ == "__main__":
    main()
