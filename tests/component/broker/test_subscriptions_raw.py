"""Failover election, seek, readers, last message id, unsubscribe, topic deletion."""

from __future__ import annotations

import asyncio

from broker_harness import RawClient

from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import ServerError
from magnetar.protocol.message_id import EARLIEST, MessageId

TOPIC = "persistent://public/default/subs"
U64 = 1 << 64


async def _produce(
    c: RawClient, n: int, topic: str = TOPIC, producer_id: int = 9, batch: int | None = None
) -> list[int]:
    await c.create_producer(topic, producer_id)
    for seq in range(n):
        c.send_message(producer_id, seq, f"m{seq}".encode(), batch=batch)
    return [(await c.expect(T.SEND_RECEIPT)).command.message_id.entryId for _ in range(n)]


async def _drain_active_changes(c: RawClient, n: int) -> dict[int, bool]:
    out = {}
    for _ in range(n):
        f = await c.expect(T.ACTIVE_CONSUMER_CHANGE)
        out[f.command.consumer_id] = f.command.is_active
    return out


async def test_failover_picks_by_priority_then_name_and_fails_over(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "fo", 2, 1, consumer_name="b")
    assert await _drain_active_changes(c, 1) == {1: True}
    await c.subscribe(TOPIC, "fo", 2, 2, consumer_name="a", priority_level=1)
    assert (await _drain_active_changes(c, 1)) == {2: False}  # the newcomer learns it is passive
    await c.subscribe(TOPIC, "fo", 2, 3, consumer_name="c")
    await _drain_active_changes(c, 1)
    await _produce(c, 3)
    for cid in (1, 2, 3):
        c.send(commands.flow(cid, 100))
    got = [await c.expect(T.MESSAGE) for _ in range(3)]
    assert {f.command.consumer_id for f in got} == {1} or {f.command.consumer_id for f in got} == {3}
    active = got[0].command.consumer_id
    # Close the active one: its unacked messages go to the next one, redelivered.
    c.send(commands.close_consumer(active, 900))
    frames = [await c.next() for _ in range(6)]
    kinds = [f.type for f in frames]
    assert T.SUCCESS in kinds
    msgs = [f for f in frames if f.type == T.MESSAGE]
    changes = {
        f.command.consumer_id: f.command.is_active for f in frames if f.type == T.ACTIVE_CONSUMER_CHANGE
    }
    new_active = ({1, 3} - {active}).pop()
    assert changes.get(new_active) is True
    rest = [await c.expect(T.MESSAGE) for _ in range(3 - len(msgs))]
    delivered = msgs + rest
    assert {f.command.consumer_id for f in delivered} == {new_active}
    assert [f.command.redelivery_count for f in delivered] == [1, 1, 1]


async def test_failover_on_partitions_uses_partition_index_modulo(broker, raw) -> None:
    await broker.service.create_partitioned_topic("persistent://public/default/fp", 2)
    c = await raw()
    for part in range(2):
        t = f"persistent://public/default/fp-partition-{part}"
        await c.subscribe(t, "fo", 2, 10 + part, consumer_name="a")
        await c.subscribe(t, "fo", 2, 20 + part, consumer_name="b")
    changes: dict[int, bool] = {}
    for _ in range(8):
        try:
            f = await c.expect(T.ACTIVE_CONSUMER_CHANGE, timeout_s=1)
        except TimeoutError:
            break
        changes[f.command.consumer_id] = f.command.is_active
    # partition 0 -> sorted[0] = "a"; partition 1 -> sorted[1] = "b"
    assert changes[10] is True and changes[20] is False
    assert changes[11] is False and changes[21] is True


async def test_seek_by_id_disconnects_then_succeeds_and_redelivers_from_there(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "sk", 0, 1)
    entries = await _produce(c, 5)
    c.send(commands.flow(1, 100))
    frames = [await c.expect(T.MESSAGE) for _ in range(5)]
    ledger = frames[0].command.message_id.ledgerId
    c.send(commands.seek(1, 42, MessageId(ledger, entries[2])))
    f = await c.expect(T.CLOSE_CONSUMER)
    assert f.command.consumer_id == 1
    f = await c.expect(T.SUCCESS)
    assert f.command.request_id == 42
    await c.subscribe(TOPIC, "sk", 0, 2)
    c.send(commands.flow(2, 100))
    again = [await c.expect(T.MESSAGE) for _ in range(3)]
    assert [f.command.message_id.entryId for f in again] == entries[2:]


async def test_seek_earliest_and_by_publish_time(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "sk2", 0, 1)
    entries = await _produce(c, 4)
    c.send(commands.flow(1, 100))
    for _ in range(4):
        await c.expect(T.MESSAGE)
    c.send(commands.seek(1, 43, EARLIEST))
    await c.expect(T.CLOSE_CONSUMER)
    await c.expect(T.SUCCESS)
    await c.subscribe(TOPIC, "sk2", 0, 2)
    c.send(commands.flow(2, 100))
    assert [(await c.expect(T.MESSAGE)).command.message_id.entryId for _ in range(4)] == entries
    # publish times are 1_700_000_000_000 + seq (see RawClient.send_message)
    c.send(commands.seek(2, 44, message_publish_time=1_700_000_000_000 + 3))
    await c.expect(T.CLOSE_CONSUMER)
    await c.expect(T.SUCCESS)
    await c.subscribe(TOPIC, "sk2", 0, 3)
    c.send(commands.flow(3, 100))
    assert (await c.expect(T.MESSAGE)).command.message_id.entryId == entries[3]
    await c.nothing()


async def test_reader_delivers_from_the_start_id_inclusive(raw) -> None:
    c = await raw()
    entries = await _produce(c, 5)
    led = await _first_ledger(c)
    await c.subscribe(TOPIC, "reader-1", 0, 1, durable=False, start_message_id=MessageId(led, entries[2]))
    c.send(commands.flow(1, 100))
    got = [(await c.expect(T.MESSAGE)).command.message_id.entryId for _ in range(3)]
    assert got == entries[2:]  # the client drops the start entry itself if exclusive
    await c.subscribe(TOPIC, "reader-2", 0, 2, durable=False, start_message_id=EARLIEST)
    c.send(commands.flow(2, 100))
    assert [(await c.expect(T.MESSAGE)).command.message_id.entryId for _ in range(5)] == entries
    latest = MessageId((1 << 63) - 1, (1 << 63) - 1)
    await c.subscribe(TOPIC, "reader-3", 0, 3, durable=False, start_message_id=latest)
    c.send(commands.flow(3, 100))
    await c.nothing()


async def _first_ledger(c: RawClient) -> int:
    await c.subscribe(TOPIC, "probe", 0, 99, initial_position=1)
    c.send(commands.flow(99, 1))
    f = await c.expect(T.MESSAGE)
    c.send(commands.close_consumer(99, 1000))
    await c.expect(T.SUCCESS)
    return f.command.message_id.ledgerId


async def test_reader_subscription_vanishes_with_its_consumer(broker, raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "reader-x", 0, 1, durable=False, start_message_id=EARLIEST)
    topic = broker.service.topics.get_loaded(TOPIC)
    assert "reader-x" in topic.subscriptions
    c.send(commands.close_consumer(1, 5))
    await c.expect(T.SUCCESS)
    assert "reader-x" not in topic.subscriptions
    assert "reader-x" not in await TopicOps(broker.service).list_subscriptions(TOPIC)


async def test_last_message_id_empty_plain_and_batch(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "lm", 0, 1)
    c.send(commands.get_last_message_id(1, 61))
    f = await c.expect(T.GET_LAST_MESSAGE_ID_RESPONSE)
    assert f.command.request_id == 61
    assert f.command.last_message_id.entryId == U64 - 1  # -1: empty topic
    await _produce(c, 2)
    c.send(commands.get_last_message_id(1, 62))
    f = await c.expect(T.GET_LAST_MESSAGE_ID_RESPONSE)
    assert f.command.last_message_id.entryId == 1
    assert f.command.last_message_id.batch_index == -1
    c.send_message(9, 2, b"b", batch=4)
    await c.expect(T.SEND_RECEIPT)
    c.send(commands.get_last_message_id(1, 63))
    f = await c.expect(T.GET_LAST_MESSAGE_ID_RESPONSE)
    assert f.command.last_message_id.entryId == 2
    assert f.command.last_message_id.batch_index == 3


async def test_unsubscribe_deletes_the_cursor(broker, raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "un", 1, 1)
    await c.subscribe(TOPIC, "un", 1, 2)
    c.send(commands.unsubscribe(1, 70))
    f = await c.expect(T.ERROR)
    assert f.command.error == ServerError.ConsumerBusy
    c.send(commands.close_consumer(2, 71))
    await c.expect(T.SUCCESS)
    c.send(commands.unsubscribe(1, 72))
    await c.expect(T.SUCCESS)
    assert "un" not in await TopicOps(broker.service).list_subscriptions(TOPIC)


async def test_deleting_a_topic_closes_its_producers_and_consumers(broker, raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "del", 0, 1)
    await c.create_producer(TOPIC, 5)
    await broker.service.delete_topic(TOPIC, force=True)
    kinds = {(await c.next()).type for _ in range(2)}
    assert kinds == {T.CLOSE_PRODUCER, T.CLOSE_CONSUMER}
    assert TOPIC not in await broker.service.list_topics("public/default")


async def test_topic_auto_creation_can_be_turned_off(broker, raw) -> None:
    await broker.service.resources.namespaces.update(
        "public/default",
        lambda p: {
            **p,
            "autoTopicCreationOverride": {"allowAutoTopicCreation": False, "topicType": "non-partitioned"},
        },
    )
    c = await raw()
    c.send(commands.producer("persistent://public/default/never", 1, 80))
    f = await c.expect(T.ERROR)
    assert f.command.error == ServerError.TopicNotFound
    await asyncio.sleep(0)


async def test_failover_switch_waits_for_the_grace_period() -> None:
    from broker_harness import running_broker

    # A generous grace period: the "nothing during the grace period" window below must
    # close well before it ends even on a loaded CI machine.
    async with running_broker(activeConsumerFailoverDelayTimeMillis=1500) as b:
        await b.service.create_partitioned_topic("persistent://public/default/fd", 1)
        t = "persistent://public/default/fd-partition-0"
        c = await RawClient.connect(b.port)
        try:
            await c.subscribe(t, "fo", 2, 2, consumer_name="b")
            await c.expect(T.ACTIVE_CONSUMER_CHANGE)
            entries = await _produce(c, 3, topic=t)
            c.send(commands.flow(2, 100))
            first = [await c.expect(T.MESSAGE) for _ in range(3)]
            ledger = first[0].command.message_id.ledgerId
            await c.subscribe(t, "fo", 2, 1, consumer_name="a")  # sorts first: takes over
            changes = {}
            for _ in range(2):
                f = await c.expect(T.ACTIVE_CONSUMER_CHANGE)
                changes[f.command.consumer_id] = f.command.is_active
            assert changes == {1: True, 2: False}
            c.send(commands.flow(1, 100))
            # The old consumer acks one message during the grace period.
            c.send(commands.ack(2, 0, [MessageId(ledger, entries[0])]))
            await c.nothing(within=0.2)
            got = [await c.expect(T.MESSAGE) for _ in range(2)]
            assert [f.command.consumer_id for f in got] == [1, 1]
            assert [f.command.message_id.entryId for f in got] == entries[1:]
        finally:
            await c.aclose()


async def test_exclusive_held_by_a_dead_connection_is_taken_over(raw) -> None:
    dead = await raw()
    await dead.subscribe(TOPIC, "ex-live", 0, 1)
    dead.answer_pings = False  # silently dead: no FIN, no PONG
    dead._task.cancel()
    alive = await raw()
    await alive.subscribe(TOPIC, "ex-live", 0, 2)  # admitted after the liveness check


async def test_exclusive_held_by_a_live_connection_is_still_busy(raw) -> None:
    holder = await raw()
    await holder.subscribe(TOPIC, "ex-busy", 0, 1)
    other = await raw()
    other.send(commands.subscribe(TOPIC, "ex-busy", 0, 2, 77))
    f = await other.response(T.ERROR, 77)
    assert f.command.error == ServerError.ConsumerBusy
