"""Seeded random walks over a Shared subscription: acks, nacks, consumers coming and going.

Invariants checked: a message acknowledged (and confirmed by the broker's handling of
the ACK) is never delivered again; when the walk ends, a fresh consumer receives
exactly the messages never acknowledged; redelivery counts never go down.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from broker_harness import RawClient

from magnetar.protocol import commands
from magnetar.protocol.enums import AckType
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.message_id import MessageId

TOPIC = "persistent://public/default/random-shared"
N = 60


async def _drain(c: RawClient, within_s: float = 0.15) -> list:
    out = []
    while True:
        try:
            out.append(await c.next(timeout_s=within_s))
        except TimeoutError:
            return out


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_walk(broker, raw, seed: int) -> None:
    rng = random.Random(seed)
    prod = await raw()
    await prod.create_producer(TOPIC, 1)
    conns = [await raw() for _ in range(3)]
    next_id = [100]

    async def open_consumer(c: RawClient) -> int:
        next_id[0] += 1
        await c.subscribe(TOPIC, "rw", 1, next_id[0], consumer_name=f"c{next_id[0]}")
        return next_id[0]

    consumers = {i: await open_consumer(c) for i, c in enumerate(conns)}
    for seq in range(N):
        prod.send_message(1, seq, f"{seq}".encode())
    for _ in range(N):
        await prod.expect(T.SEND_RECEIPT)

    acked: set[int] = set()
    ledger = 0  # from the MESSAGEs (one ledger here)
    held: dict[int, list[int]] = {i: [] for i in consumers}
    max_count: dict[int, int] = {}
    for _step in range(40):
        i = rng.randrange(len(conns))
        c, cid = conns[i], consumers[i]
        action = rng.choice(["flow", "flow", "ack", "ack", "nack", "reopen"])
        if action == "flow":
            c.send(commands.flow(cid, rng.randint(1, 8)))
        elif action == "ack" and held[i]:
            picks = rng.sample(held[i], k=rng.randint(1, len(held[i])))
            c.send(commands.ack(cid, AckType.Individual, [MessageId(ledger, e) for e in picks]))
            acked.update(picks)
            held[i] = [e for e in held[i] if e not in picks]
        elif action == "nack" and held[i]:
            picks = rng.sample(held[i], k=rng.randint(1, len(held[i])))
            c.send(commands.redeliver_unacknowledged(cid, [MessageId(ledger, e) for e in picks]))
            held[i] = [e for e in held[i] if e not in picks]
        elif action == "reopen":
            rid = c.rid()
            c.send(commands.close_consumer(cid, rid))
            await c.response(T.SUCCESS, rid)
            held[i] = []
            consumers[i] = await open_consumer(c)
        await asyncio.sleep(0.01)
        for j, cj in enumerate(conns):
            for f in await _drain(cj, 0.02):
                if f.type != T.MESSAGE or f.command.consumer_id != consumers[j]:
                    continue
                e = f.command.message_id.entryId
                ledger = f.command.message_id.ledgerId
                assert e not in acked, f"entry {e} delivered after it was acknowledged"
                assert f.command.redelivery_count >= max_count.get(e, 0)
                max_count[e] = f.command.redelivery_count
                held[j].append(e)
    # Everyone leaves; a fresh consumer gets exactly what was never acknowledged.
    for i, c in enumerate(conns):
        rid = c.rid()
        c.send(commands.close_consumer(consumers[i], rid))
        await c.response(T.SUCCESS, rid)
    last = await raw()
    await last.subscribe(TOPIC, "rw", 1, 999)
    last.send(commands.flow(999, 1000))
    got = [f.command.message_id.entryId for f in await _drain(last, 0.5) if f.type == T.MESSAGE]
    assert sorted(got) == sorted(set(range(N)) - acked)
    assert acked and max(max_count.values()) > 0  # the walk did ack and redeliver
