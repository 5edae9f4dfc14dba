"""Publish path, permits, acks and redelivery, driven frame by frame."""

from __future__ import annotations

import asyncio

from broker_harness import RawClient, running_broker

from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.protocol import commands
from magnetar.protocol.enums import AckType, ServerError
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import parse_headers_and_payload

TOPIC = "persistent://public/default/raw"


async def test_producer_name_is_assigned_and_receipts_come_in_order(broker, raw) -> None:
    c = await raw()
    name = await c.create_producer(TOPIC)
    assert name.startswith("standalone-")
    for seq in range(50):
        c.send_message(1, seq, f"m{seq}".encode(), producer_name=name)
    receipts = [await c.expect(T.SEND_RECEIPT) for _ in range(50)]
    assert [r.command.sequence_id for r in receipts] == list(range(50))
    entries = [r.command.message_id.entryId for r in receipts]
    assert entries == list(range(50))  # a fresh topic starts at entry 0
    stats = await TopicOps(broker.service).topic_stats(TOPIC)
    assert stats["msgInCounter"] == 50
    assert stats["publishers"][0]["producerName"] == name


async def test_second_producer_gets_a_different_name_and_user_names_must_be_unique(raw) -> None:
    c = await raw()
    a = await c.create_producer(TOPIC, 1)
    b = await c.create_producer(TOPIC, 2)
    assert a != b
    await c.create_producer(TOPIC, 3, producer_name="mine")
    c.send(commands.producer(TOPIC, 4, 77, producer_name="mine"))
    f = await c.expect(T.ERROR)
    assert f.command.error == ServerError.ProducerBusy and f.command.request_id == 77


async def test_checksum_mismatch_is_a_soft_send_error(raw) -> None:
    c = await raw()
    name = await c.create_producer(TOPIC)
    from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

    meta = new_message_metadata(producer_name=name, sequence_id=0, publish_time=1)
    good = build_headers_and_payload(meta, b"payload")
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])
    c.send(commands.send(1, 0, bad))
    f = await c.expect(T.SEND_ERROR)
    assert f.command.error == ServerError.ChecksumError and f.command.sequence_id == 0
    c.send(commands.send(1, 1, build_headers_and_payload(meta, b"ok")))
    f = await c.expect(T.SEND_RECEIPT)
    assert f.command.sequence_id == 1


async def test_stored_bytes_are_replayed_unchanged(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "s", 0, 1)
    c.send(commands.flow(1, 10))
    await c.create_producer(TOPIC)
    c.send_message(1, 0, b"hello", producer_name="px")
    frames = {f.type: f for f in [await c.next(), await c.next()]}
    assert set(frames) == {T.SEND_RECEIPT, T.MESSAGE}
    f = frames[T.MESSAGE]
    parsed = parse_headers_and_payload(f.headers_and_payload)
    assert parsed.checksum_ok and parsed.payload == b"hello"
    assert parsed.metadata.producer_name == "px"
    assert f.command.message_id.partition == -1 or not f.command.message_id.HasField("partition")


async def test_permits_count_messages_and_may_go_negative(raw) -> None:
    c = await raw()
    await c.create_producer(TOPIC)
    for seq in range(3):
        c.send_message(1, seq, b"batch", batch=5)
    for _ in range(3):
        await c.expect(T.SEND_RECEIPT)
    await c.subscribe(TOPIC, "s", 0, 1, initial_position=1)
    c.send(commands.flow(1, 1))
    f = await c.expect(T.MESSAGE)
    assert f.command.message_id.entryId == 0
    await c.nothing()  # permits are now -4
    c.send(commands.flow(1, 4))
    await c.nothing()  # back to 0: still nothing
    c.send(commands.flow(1, 1))
    f = await c.expect(T.MESSAGE)
    assert f.command.message_id.entryId == 1


async def test_exclusive_refuses_a_second_consumer(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "s", 0, 1)
    c.send(commands.subscribe(TOPIC, "s", 0, 2, 55))
    f = await c.expect(T.ERROR)
    assert f.command.error == ServerError.ConsumerBusy
    assert f.command.message == "Exclusive consumer is already connected"
    c.send(commands.subscribe(TOPIC, "s", 1, 3, 56))
    f = await c.expect(T.ERROR)
    assert f.command.error == ServerError.ConsumerBusy


async def _produce(c: RawClient, n: int, producer_id: int = 9) -> None:
    await c.create_producer(TOPIC, producer_id)
    for seq in range(n):
        c.send_message(producer_id, seq, f"m{seq}".encode())
    for _ in range(n):
        await c.expect(T.SEND_RECEIPT)


async def test_shared_round_robin_within_permits(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "sh", 1, 1, consumer_name="a")
    await c.subscribe(TOPIC, "sh", 1, 2, consumer_name="b")
    await _produce(c, 10)
    c.send(commands.flow(1, 3))
    c.send(commands.flow(2, 100))
    got = {1: [], 2: []}
    for _ in range(10):
        f = await c.expect(T.MESSAGE)
        got[f.command.consumer_id].append(f.command.message_id.entryId)
    assert len(got[1]) == 3 and len(got[2]) == 7
    assert sorted(got[1] + got[2]) == list(range(10))


async def test_redelivery_counts_grow_on_every_redelivery(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "sh", 1, 1)
    await _produce(c, 1)
    c.send(commands.flow(1, 100))
    counts = []
    for _ in range(4):
        f = await c.expect(T.MESSAGE)
        counts.append(f.command.redelivery_count)
        mid = MessageId(f.command.message_id.ledgerId, f.command.message_id.entryId)
        c.send(commands.redeliver_unacknowledged(1, [mid]))
    assert counts == [0, 1, 2, 3]


async def test_exclusive_redeliver_without_ids_rewinds_everything_unacked(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "ex", 0, 1)
    await _produce(c, 3)
    c.send(commands.flow(1, 100))
    first = [await c.expect(T.MESSAGE) for _ in range(3)]
    m0 = first[0].command.message_id
    c.send(commands.ack(1, AckType.Individual, [MessageId(m0.ledgerId, m0.entryId)]))
    await asyncio.sleep(0.1)
    c.send(commands.redeliver_unacknowledged(1))
    again = [await c.expect(T.MESSAGE) for _ in range(2)]
    assert [f.command.message_id.entryId for f in again] == [1, 2]
    assert all(f.command.redelivery_count == 1 for f in again)


async def test_unacked_messages_go_to_the_next_consumer_when_one_closes(raw) -> None:
    c1 = await raw()
    c2 = await raw()
    await c1.subscribe(TOPIC, "sh", 1, 1)
    await _produce(c1, 4)
    c1.send(commands.flow(1, 100))
    for _ in range(4):
        await c1.expect(T.MESSAGE)
    await c2.subscribe(TOPIC, "sh", 1, 1)
    c2.send(commands.flow(1, 100))
    await c2.nothing()
    c1.send(commands.close_consumer(1, 5))
    await c1.expect(T.SUCCESS)
    got = [await c2.expect(T.MESSAGE) for _ in range(4)]
    assert sorted(f.command.message_id.entryId for f in got) == [0, 1, 2, 3]
    assert all(f.command.redelivery_count == 1 for f in got)


async def test_cumulative_ack_moves_mark_delete(broker, raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "cum", 0, 1)
    await _produce(c, 5)
    c.send(commands.flow(1, 100))
    frames = [await c.expect(T.MESSAGE) for _ in range(5)]
    m = frames[2].command.message_id
    c.send(commands.ack(1, AckType.Cumulative, [MessageId(m.ledgerId, m.entryId)]))
    await asyncio.sleep(0.1)
    stats = await TopicOps(broker.service).topic_stats(TOPIC)
    assert stats["subscriptions"]["cum"]["msgBacklog"] == 2
    assert stats["subscriptions"]["cum"]["consumers"][0]["unackedMessages"] == 2


async def test_back_pressure_stops_reading_while_adds_are_pending() -> None:
    async with running_broker(maxPendingPublishRequestsPerConnection=4) as b:
        c = await RawClient.connect(b.port)
        try:
            await c.create_producer(TOPIC)
            b.bk.faults.hold_adds()
            for seq in range(20):
                c.send_message(1, seq, b"x")
            await asyncio.sleep(0.3)
            cnx = next(iter(b.service.connections))
            assert cnx.pending_publishes <= 5  # stopped reading at the bound
            b.bk.faults.release_adds()
            receipts = [await c.expect(T.SEND_RECEIPT) for _ in range(20)]
            assert [r.command.sequence_id for r in receipts] == list(range(20))
        finally:
            await c.aclose()


async def test_durable_subscription_survives_a_broker_restart() -> None:
    async with running_broker() as b:
        c = await RawClient.connect(b.port)
        await c.subscribe(TOPIC, "d", 0, 1)
        await _produce(c, 4)
        c.send(commands.flow(1, 100))
        frames = [await c.expect(T.MESSAGE) for _ in range(4)]
        ids = [MessageId(f.command.message_id.ledgerId, f.command.message_id.entryId) for f in frames]
        c.send(commands.ack(1, AckType.Individual, [ids[0], ids[2]]))
        await asyncio.sleep(0.2)
        await c.aclose()
        await b.restart_service()
        c = await RawClient.connect(b.port)
        try:
            await c.subscribe(TOPIC, "d", 0, 1)
            c.send(commands.flow(1, 100))
            got = [await c.expect(T.MESSAGE) for _ in range(2)]
            assert [f.command.message_id.entryId for f in got] == [ids[1].entry_id, ids[3].entry_id]
            await c.nothing()
        finally:
            await c.aclose()


async def test_switching_subscription_type_keeps_unacked_messages(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "sw", 1, 1)
    await _produce(c, 3)
    c.send(commands.flow(1, 100))
    for _ in range(3):
        await c.expect(T.MESSAGE)
    c.send(commands.close_consumer(1, 900))
    await c.response(T.SUCCESS, 900)
    await c.subscribe(TOPIC, "sw", 0, 2)  # now Exclusive
    c.send(commands.flow(2, 100))
    got = [await c.expect(T.MESSAGE) for _ in range(3)]
    assert [f.command.message_id.entryId for f in got] == [0, 1, 2]


async def test_a_failed_bookie_write_keeps_receipts_in_order(broker, raw) -> None:
    c = await raw()
    await c.create_producer(TOPIC)
    broker.bk.faults.fail_add(10)
    for seq in range(30):
        c.send_message(1, seq, f"m{seq}".encode())
    seen: list[int] = []
    closed = False
    while True:
        try:
            f = await c.next(timeout_s=1.0)
        except TimeoutError:
            break
        if f.type == T.SEND_RECEIPT:
            assert not closed, f"receipt {f.command.sequence_id} after the producer was closed (seen {seen})"
            seen.append(f.command.sequence_id)
        elif f.type == T.CLOSE_PRODUCER:
            closed = True
        else:
            raise AssertionError(f"unexpected {f.type.name}")
    assert seen == list(range(len(seen)))  # in order, no gaps
    assert len(seen) == 30 or closed


async def test_a_fenced_ledger_closes_the_producer_without_later_receipts(broker, raw) -> None:
    from magnetar.bookkeeper.api import LedgerFencedError

    c = await raw()
    await c.create_producer(TOPIC)
    broker.bk.faults.fail_add(5, LedgerFencedError("fenced by a test"))
    for seq in range(20):
        c.send_message(1, seq, b"x")
    kinds = []
    while True:
        try:
            f = await c.next(timeout_s=1.0)
        except TimeoutError:
            break
        kinds.append(f.command.sequence_id if f.type == T.SEND_RECEIPT else f.type.name)
    assert kinds == [0, 1, 2, 3, "CLOSE_PRODUCER"]
    # The topic was unloaded: the next producer gets a freshly recovered ledger.
    for _ in range(50):
        if broker.service.topics.get_loaded(TOPIC) is None:
            break
        await asyncio.sleep(0.05)
    assert broker.service.topics.get_loaded(TOPIC) is None
    await c.create_producer(TOPIC, 2)
    c.send_message(2, 0, b"again")
    await c.expect(T.SEND_RECEIPT)


async def test_a_consumer_that_does_not_read_does_not_grow_the_broker_buffer(broker, raw) -> None:
    from magnetar.broker.service.connection import WRITE_HIGH_WATER_BYTES

    slow = await raw()
    await slow.subscribe(TOPIC, "slow", 0, 1)
    slow.send(commands.flow(1, 1000))
    await asyncio.sleep(0.05)
    slow._task.cancel()  # stop reading the socket
    prod = await raw()
    await prod.create_producer(TOPIC, 2)
    body = b"x" * 100_000
    for seq in range(300):  # 30 MB
        prod.send_message(2, seq, body)
    for _ in range(300):
        await prod.expect(T.SEND_RECEIPT)
    await asyncio.sleep(0.3)
    cnx = next(c for c in broker.service.connections if 1 in c.consumers)
    buffered = cnx.writer.transport.get_write_buffer_size()
    assert buffered < WRITE_HIGH_WATER_BYTES + 2 * 1024 * 1024
    assert cnx.consumers[1].msg_out_counter < 300
    # Reading again lets everything through.
    slow._task = asyncio.get_running_loop().create_task(slow._pump())
    got = 0
    while got < 300:
        f = await slow.next(timeout_s=10)
        if f.type == T.MESSAGE:
            got += 1


async def test_shared_prefers_the_best_priority_level(raw) -> None:
    c = await raw()
    await c.subscribe(TOPIC, "prio", 1, 1, consumer_name="low", priority_level=1)
    await c.subscribe(TOPIC, "prio", 1, 2, consumer_name="high", priority_level=0)
    c.send(commands.flow(1, 100))
    c.send(commands.flow(2, 4))
    await _produce(c, 10)
    got = {1: 0, 2: 0}
    for _ in range(10):
        f = await c.expect(T.MESSAGE)
        got[f.command.consumer_id] += 1
    assert got == {2: 4, 1: 6}  # the high-priority one first, up to its permits
