"""Inactive topic deletion: modes delete_when_no_subscriptions and delete_when_subscriptions_caught_up."""

from __future__ import annotations

import asyncio

from broker_harness import RawClient, running_broker

from magnetar.broker.service.names import parse_topic
from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType as T


async def _publish_and_close(c: RawClient, topic: str, producer_id: int) -> None:
    await c.create_producer(topic, producer_id)
    c.send_message(producer_id, 0, b"x")
    await c.expect(T.SEND_RECEIPT)
    rid = c.rid()
    c.send(commands.close_producer(producer_id, rid))
    await c.response(T.SUCCESS, rid)


async def _wait_unloaded(b, topic: str) -> None:
    for _ in range(80):
        if b.service.topics.get_loaded(topic) is None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{topic} still loaded")


async def test_no_subscriptions_mode_deletes_and_keeps_subscribed_topics() -> None:
    async with running_broker(brokerDeleteInactiveTopicsFrequencySeconds=1) as b:
        gone = "persistent://public/default/inactive-gone"
        kept = "persistent://public/default/inactive-kept"
        c = await RawClient.connect(b.port)
        try:
            await _publish_and_close(c, gone, 1)
            await c.subscribe(kept, "s", 0, 1)
            await _publish_and_close(c, kept, 2)
            rid = c.rid()
            c.send(commands.close_consumer(1, rid))
            await c.response(T.SUCCESS, rid)
            await _wait_unloaded(b, gone)
            await _wait_unloaded(b, kept)
            factory = b.service.ml_factory
            assert not await factory.exists(parse_topic(gone).managed_ledger_name), "no subscription: deleted"
            assert await factory.exists(parse_topic(kept).managed_ledger_name), "a subscription keeps it"
        finally:
            await c.aclose()


async def test_caught_up_mode_deletes_only_when_every_backlog_is_empty() -> None:
    async with running_broker(
        brokerDeleteInactiveTopicsFrequencySeconds=1,
        brokerDeleteInactiveTopicsMode="delete_when_subscriptions_caught_up",
    ) as b:
        behind = "persistent://public/default/inactive-behind"
        c = await RawClient.connect(b.port)
        try:
            await c.subscribe(behind, "s", 0, 1)
            await _publish_and_close(c, behind, 1)
            rid = c.rid()
            c.send(commands.close_consumer(1, rid))
            await c.response(T.SUCCESS, rid)
            await _wait_unloaded(b, behind)
            name = parse_topic(behind).managed_ledger_name
            assert await b.service.ml_factory.exists(name), "a backlog keeps the topic"
        finally:
            await c.aclose()
