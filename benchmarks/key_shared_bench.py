"""Key_Shared dispatch throughput: 10 consumers, 10,000 keys (and Shared as a baseline).

What it measures: the broker's dispatch step alone -- read entries from a
cursor, hash each entry's sticky key, pick the owner, track per-slot holders
(draining hashes), write MESSAGE frames -- with the cursor and connections
replaced by in-memory fakes, so storage and sockets are not in the figure.
Consumers ack everything they got after each round and re-grant permits, as
a fast application would.  A second phase adds and removes consumers every
``--churn-every`` rounds to show the cost of draining hashes.

    .venv/bin/python benchmarks/key_shared_bench.py [--messages 200000] [--keys 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from types import SimpleNamespace

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.consumer import Consumer
from magnetar.broker.service.dispatcher_key_shared import KeySharedDispatcher
from magnetar.broker.service.dispatcher_multi import MultiConsumerDispatcher
from magnetar.broker.service.policies import UNRESOLVED
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata
from magnetar.runtime import RealClock, TaskSupervisor


class FakeCnx:
    writable = True
    peer_address = "bench"
    client_version = "bench"

    def __init__(self) -> None:
        self.frames = 0

    def send_message(self, *_args: object) -> None:
        self.frames += 1


class FakeCursor:
    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.by_pos = {e.position: e for e in entries}
        self.next = 0

    async def read_entries(self, n: int, _max_bytes: int | None = None) -> list[Entry]:
        out = self.entries[self.next : self.next + n]
        self.next += len(out)
        return out

    async def replay_entries(self, positions: list[Position]) -> list[Entry]:
        return [self.by_pos[p] for p in positions]

    def get_ack_set(self, _pos: Position) -> None:
        return None


def make_entries(n: int, keys: int) -> list[Entry]:
    out = []
    for i in range(n):
        md = new_message_metadata(
            producer_name="p", sequence_id=i, publish_time=0, partition_key=f"key-{i % keys}"
        )
        out.append(Entry(Position(1, i), build_headers_and_payload(md, b"x" * 100)))
    return out


async def run(kind: str, entries: list[Entry], n_consumers: int, churn_every: int) -> tuple[float, int]:
    config = BrokerConfig()
    topic = SimpleNamespace(
        config=config,
        clock=RealClock(),
        supervisor=TaskSupervisor("bench"),
        partition_index=-1,
        name="bench",
        policies=UNRESOLVED,
    )
    cursor = FakeCursor(entries)
    sub = SimpleNamespace(topic=topic, cursor=cursor, name="s")
    cls = KeySharedDispatcher if kind == "Key_Shared" else MultiConsumerDispatcher
    sub_type = 3 if kind == "Key_Shared" else 1
    d = cls(sub, sub_type)
    d.delayed = None
    serial = 0

    def new_consumer() -> Consumer:
        nonlocal serial
        serial += 1
        c = Consumer(sub, FakeCnx(), serial, f"consumer-{serial}", 0, sub_type, -1, 0, {}, 0)  # type: ignore[arg-type]
        c.permits = 1000
        d.consumers.append(c)
        if kind == "Key_Shared":
            d.check_consumer(c)
        return c

    for _ in range(n_consumers):
        new_consumer()
    delivered = 0
    rounds = 0
    t0 = time.perf_counter()
    while delivered < len(entries):
        await d._dispatch_once()
        rounds += 1
        for c in list(d.consumers):
            got = list(c.pending_acks)
            delivered += len(got)
            c.acked(got, 0)
            d.forget(got)
            c.permits = 1000
        if churn_every and rounds % churn_every == 0:
            # one consumer leaves (its unacked go back) and a new one joins
            victim = d.consumers[0]
            d.consumers.remove(victim)
            if kind == "Key_Shared":
                d.selector.remove_consumer(victim)
            d.redeliver(victim.take_pending())
            new_consumer()
        if rounds > 10 * len(entries):
            raise RuntimeError("no progress")
    elapsed = time.perf_counter() - t0
    return len(entries) / elapsed, rounds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--consumers", type=int, default=10)
    ap.add_argument("--churn-every", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    entries = make_entries(args.messages, args.keys)
    print(f"{args.messages} messages, {args.keys} keys, {args.consumers} consumers (dispatch only, fake I/O)")
    for kind, churn in (("Shared", 0), ("Key_Shared", 0), ("Key_Shared", args.churn_every)):
        rates = []
        for _ in range(args.repeat):
            rate, rounds = asyncio.run(run(kind, entries, args.consumers, churn))
            rates.append(rate)
        label = f"{kind}{' + churn every ' + str(churn) + ' rounds' if churn else ''}"
        print(f"{label:40s} {statistics.median(rates):>10,.0f} msg/s  ({rounds} rounds)")


if __name__ == "__main__":
    main()
