"""Producer access modes over the wire."""

from __future__ import annotations

from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import ProducerAccessMode, ServerError

TOPIC = "persistent://public/default/access"


async def test_exclusive_refusals(raw) -> None:
    c = await raw()
    await c.create_producer(TOPIC, 1)
    c.send(commands.producer(TOPIC, 2, 500, access_mode=ProducerAccessMode.Exclusive))
    f = await c.response(T.ERROR, 500)
    assert f.command.error == ServerError.ProducerFenced
    c.send(commands.close_producer(1, 501))
    await c.response(T.SUCCESS, 501)
    await c.create_producer(TOPIC, 3, access_mode=ProducerAccessMode.Exclusive)
    c.send(commands.producer(TOPIC, 4, 502))
    f = await c.response(T.ERROR, 502)
    assert f.command.error == ServerError.ProducerBusy


async def test_fencing_takes_over(raw) -> None:
    a = await raw()
    b = await raw()
    await a.create_producer(TOPIC, 1)
    await b.create_producer(TOPIC, 1, access_mode=ProducerAccessMode.ExclusiveWithFencing)
    f = await a.expect(T.CLOSE_PRODUCER)
    assert f.command.producer_id == 1


async def test_wait_for_exclusive_is_promoted_when_the_topic_frees_up(raw) -> None:
    a = await raw()
    b = await raw()
    await a.create_producer(TOPIC, 1, access_mode=ProducerAccessMode.Exclusive)
    b.send(commands.producer(TOPIC, 7, 600, access_mode=ProducerAccessMode.WaitForExclusive))
    f = await b.response(T.PRODUCER_SUCCESS, 600)
    assert f.command.producer_ready is False
    await b.nothing()
    a.send(commands.close_producer(1, 601))
    await a.response(T.SUCCESS, 601)
    f = await b.expect(T.PRODUCER_SUCCESS)
    assert f.command.request_id == 600 and f.command.producer_ready is True
    b.send_message(7, 0, b"x")
    await b.expect(T.SEND_RECEIPT)
