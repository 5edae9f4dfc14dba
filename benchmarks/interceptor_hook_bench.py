"""What a broker-interceptor hook site costs: none configured vs one no-op interceptor.

Theory of operation: the per-entry hook sites (``Connection.send_message`` for
dispatch, ``handle_send`` for publish) are timed directly, on the broker's
real objects, in a loop: a ``Connection`` over a fake writer (frames are built
and queued exactly as in production, the socket write is skipped) and the
real SEND handler over a stub producer.  Once with ``service.interceptor =
None`` (the default) and once with an ``InterceptorChain`` holding one
``BrokerInterceptor`` whose hooks are the inherited no-ops.  The figure is
CPU nanoseconds per call (process time, interleaved runs), median of ``--repeat`` runs; the difference between the
two columns is the price of one configured no-op interceptor.  Figures, never
pass/fail.

    .venv/bin/python benchmarks/interceptor_hook_bench.py [--calls 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from types import SimpleNamespace

from magnetar.broker.config import BrokerConfig
from magnetar.broker.interceptors import BrokerInterceptor, InterceptorChain
from magnetar.broker.service.connection import Connection
from magnetar.managed_ledger.api import Position


class _Writer:
    transport = None

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 1) if name == "peername" else None

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        pass


async def _dispatch_ns(interceptor: object, calls: int) -> float:
    svc = SimpleNamespace(config=BrokerConfig(), interceptor=interceptor, supervisor=None)
    cnx = Connection(svc, None, _Writer())  # type: ignore[arg-type]
    cnx.consumers[1] = SimpleNamespace(consumer_id=1)
    data = b"x" * 1024
    pos = Position(7, 0)
    t0 = time.process_time_ns()  # CPU time: other processes on a busy machine do not count
    for i in range(calls):
        cnx.send_message(1, pos, -1, data, 0, None)
        if i % 1000 == 999:
            cnx._out.clear()
    return (time.process_time_ns() - t0) / calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    noop = InterceptorChain([("noop", BrokerInterceptor())])
    variants = (("no interceptor", None), ("one no-op interceptor", noop))
    samples: dict[str, list[float]] = {label: [] for label, _ in variants}
    asyncio.run(_dispatch_ns(None, args.calls // 10))  # warm-up
    for _ in range(args.repeat):  # interleaved, so drifting machine load hits both alike
        for label, ic in variants:
            samples[label].append(asyncio.run(_dispatch_ns(ic, args.calls)))
    rows = {label: statistics.median(v) for label, v in samples.items()}
    print(f"Connection.send_message (1 KiB entry), ns/call, median of {args.repeat} x {args.calls}:")
    for label, ns in rows.items():
        print(f"  {label:24s} {ns:8.0f}")
    print(
        f"  cost of one no-op interceptor: {rows['one no-op interceptor'] - rows['no interceptor']:+.0f} ns/entry"
    )


if __name__ == "__main__":
    main()
