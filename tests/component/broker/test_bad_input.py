"""Bad input never takes the broker down: garbage closes one connection, odd commands get errors."""

from __future__ import annotations

import asyncio
import random

import pytest
from broker_harness import RawClient

from magnetar.protocol import commands
from magnetar.protocol.enums import AckType
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.message_id import MessageId

TOPIC = "persistent://public/default/bad"


async def _still_serving(port: int) -> None:
    c = await RawClient.connect(port)
    try:
        c.send(commands.lookup(TOPIC, 1))
        await c.expect(T.LOOKUP_RESPONSE)
    finally:
        await c.aclose()


@pytest.mark.parametrize("seed", range(4))
async def test_random_bytes_close_only_that_connection(broker, raw, seed: int) -> None:
    rng = random.Random(seed)
    victim = await raw(handshake=seed % 2 == 0)
    for _ in range(20):
        victim.send(rng.randbytes(rng.randint(1, 200)))
    await asyncio.wait_for(victim.eof.wait(), 5)
    await _still_serving(broker.port)


async def test_oversized_frame_is_refused_before_buffering(broker, raw) -> None:
    c = await raw()
    c.send((1 << 30).to_bytes(4, "big") + b"\x00" * 16)
    await asyncio.wait_for(c.eof.wait(), 5)
    await _still_serving(broker.port)


async def test_odd_but_valid_commands_get_answers(broker, raw) -> None:
    c = await raw()
    # Unknown ids: ignored or answered, never fatal.
    c.send(commands.flow(42, 10))
    c.send(commands.ack(42, AckType.Individual, [MessageId(1, 1)]))
    c.send(commands.redeliver_unacknowledged(42))
    c.send(commands.close_consumer(42, 300))
    await c.response(T.SUCCESS, 300)
    c.send(commands.close_producer(42, 301))
    await c.response(T.SUCCESS, 301)
    c.send(commands.seek(42, 302, MessageId(1, 1)))
    f = await c.next()
    assert f.type == T.ERROR and f.command.request_id == 302
    c.send(commands.get_last_message_id(42, 303))
    f = await c.next()
    assert f.type == T.ERROR and f.command.request_id == 303
    # Invalid names.
    c.send(commands.producer("persistent://bad name/x/y", 1, 304))
    f = await c.next()
    assert f.type == T.ERROR and f.command.error == 17  # InvalidTopicName
    c.send(commands.subscribe("a/b", "s", 0, 1, 305))
    f = await c.next()
    assert f.type == T.ERROR and f.command.error == 17
    # Acks for positions that never existed.
    await c.subscribe(TOPIC, "s", 0, 7)
    c.send(commands.ack(7, AckType.Individual, [MessageId(999_999, 5)]))
    c.send(commands.ack(7, AckType.Cumulative, [MessageId(999_999, 5)]))
    c.send(commands.seek(7, 306, MessageId(999_999, 5)))
    frames = [await c.next() for _ in range(2)]
    assert {f.type for f in frames} <= {T.CLOSE_CONSUMER, T.SUCCESS, T.ERROR}
    await _still_serving(broker.port)
