"""Isolation: consumers never see uncommitted or aborted messages, committed order is kept,
a transaction that times out is aborted, two transactions acking one message conflict.

Against a real ``magnetar standalone`` subprocess (tests/txn/conftest.py); transactions are
driven by ``magnetar.client``; the official ``pulsar-client`` is one of the consumers.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from magnetar.client.errors import PulsarException, Timeout, TransactionConflict

NO_MESSAGE_MS = 700


async def _drain(consumer, wait_ms: int = NO_MESSAGE_MS) -> list[bytes]:
    out = []
    while True:
        try:
            msg = await consumer.receive(wait_ms)
        except Timeout:
            return out
        out.append(msg.data())
        await consumer.acknowledge(msg)


async def test_uncommitted_invisible_committed_order_kept(client, topic):
    producer = await client.create_producer(topic, batching_enabled=False)
    consumer = await client.subscribe(topic, "iso", initial_position="earliest")
    t1 = await client.transaction(timeout=30)
    t2 = await client.transaction(timeout=30)
    await producer.send(b"p1")
    await producer.send(b"a1", txn=t1)
    await producer.send(b"a2", txn=t1)
    await producer.send(b"p2")
    await producer.send(b"b1", txn=t2)
    assert await _drain(consumer) == [b"p1"]  # stops at t1's first entry
    await t2.commit()
    assert await _drain(consumer) == []  # t1 still open: nothing after its first entry moves
    await t1.commit()
    assert await _drain(consumer, 2000) == [b"a1", b"a2", b"p2", b"b1"]


async def test_aborted_never_visible_with_context_manager(client, topic):
    producer = await client.create_producer(topic, batching_enabled=False)
    consumer = await client.subscribe(topic, "iso", initial_position="earliest")

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with client.transaction(timeout=30) as txn:
            await producer.send(b"x1", txn=txn)
            await producer.send(b"x2", txn=txn)
            raise Boom
    async with client.transaction(timeout=30) as txn:
        await producer.send(b"c1", txn=txn)
    await producer.send(b"y1")
    assert await _drain(consumer, 2000) == [b"c1", b"y1"]


async def test_official_client_sees_only_committed(client, topic, txn_broker):
    pulsar = pytest.importorskip("pulsar")
    official = pulsar.Client(
        txn_broker.broker_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )
    try:
        consumer = await asyncio.to_thread(
            official.subscribe, topic, "official", initial_position=pulsar.InitialPosition.Earliest
        )

        def receive_all(wait_ms: int) -> list[bytes]:
            got = []
            while True:
                try:
                    msg = consumer.receive(wait_ms)
                except pulsar.Timeout:
                    return got
                got.append(msg.data())
                consumer.acknowledge(msg)

        producer = await client.create_producer(topic, batching_enabled=False)
        open_txn = await client.transaction(timeout=30)
        aborted = await client.transaction(timeout=30)
        await producer.send(b"u1", txn=open_txn)
        await producer.send(b"r1", txn=aborted)
        await producer.send(b"u2", txn=open_txn)
        assert await asyncio.to_thread(receive_all, NO_MESSAGE_MS) == []
        await aborted.abort()
        assert await asyncio.to_thread(receive_all, NO_MESSAGE_MS) == []
        await open_txn.commit()
        await producer.send(b"after")
        assert await asyncio.to_thread(receive_all, 2000) == [b"u1", b"u2", b"after"]
    finally:
        await asyncio.to_thread(official.close)


async def test_timed_out_transaction_is_aborted(client, topic):
    producer = await client.create_producer(topic, batching_enabled=False)
    consumer = await client.subscribe(topic, "iso", initial_position="earliest")
    txn = await client.transaction(timeout=1)
    await producer.send(b"late", txn=txn)
    await producer.send(b"plain")
    assert await _drain(consumer) == []  # blocked behind the open transaction
    await asyncio.sleep(2.0)  # the coordinator times it out and aborts it
    assert await _drain(consumer, 2000) == [b"plain"]
    with pytest.raises(PulsarException):
        await txn.commit()


async def test_conflicting_acks_and_abort_makes_messages_available(client, topic):
    producer = await client.create_producer(topic, batching_enabled=False)
    consumer = await client.subscribe(topic, "acks", consumer_type="Shared", initial_position="earliest")
    await producer.send(b"m1")
    await producer.send(b"m2")
    m1 = await consumer.receive(2000)
    m2 = await consumer.receive(2000)
    t1 = await client.transaction(timeout=30)
    await consumer.acknowledge(m1, txn=t1)
    t2 = await client.transaction(timeout=30)
    with pytest.raises(TransactionConflict):
        await consumer.acknowledge(m1, txn=t2)
    await t2.abort()
    await t1.abort()  # m1 is available again
    again = await consumer.receive(3000)
    assert again.data() == b"m1"
    async with client.transaction(timeout=30) as t3:
        await consumer.acknowledge(again, txn=t3)
        await consumer.acknowledge(m2, txn=t3)
    # committed: nothing is redelivered to a new consumer of the subscription
    await consumer.close()
    consumer = await client.subscribe(topic, "acks", consumer_type="Shared")
    assert await _drain(consumer) == []
    # a message acknowledged already conflicts too (Pulsar's rule)
    t4 = await client.transaction(timeout=30)
    with pytest.raises(TransactionConflict):
        await consumer.acknowledge(again.message_id(), txn=t4)
    await t4.abort()


async def test_reader_last_message_id_skips_markers_and_open_transactions(client, topic, txn_broker):
    producer = await client.create_producer(topic, batching_enabled=False)
    await producer.send(b"m1")
    async with client.transaction(timeout=30) as txn:
        await producer.send(b"c1", txn=txn)
    aborted = await client.transaction(timeout=30)
    await producer.send(b"a1", txn=aborted)
    await aborted.abort()  # the topic now ends with: c1, commit marker, a1, abort marker
    reader = await client.create_reader(topic, "earliest")
    got = []
    while await reader.has_message_available():
        got.append((await reader.read_next(2000)).data())
    assert got == [b"m1", b"c1"]
    open_txn = await client.transaction(timeout=30)
    await producer.send(b"u1", txn=open_txn)
    await producer.send(b"p2")
    assert not await reader.has_message_available()  # behind the open transaction
    await open_txn.commit()
    assert await reader.has_message_available()
    assert (await reader.read_next(2000)).data() == b"u1"
    assert (await reader.read_next(2000)).data() == b"p2"
    # the official client's reader agrees
    pulsar = pytest.importorskip("pulsar")
    official = pulsar.Client(txn_broker.broker_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:

        def read_all() -> list[bytes]:
            r = official.create_reader(topic, pulsar.MessageId.earliest)
            out = []
            while r.has_message_available():
                out.append(r.read_next(2000).data())
            r.close()
            return out

        assert await asyncio.to_thread(read_all) == [b"m1", b"c1", b"u1", b"p2"]
    finally:
        await asyncio.to_thread(official.close)


async def test_partitioned_topic_commits_all_partitions_atomically(client, topic, txn_broker):
    import urllib.request

    path = topic.replace("persistent://", "")
    req = urllib.request.Request(
        f"{txn_broker.web_url}/admin/v2/persistent/{path}/partitions",
        data=b"3",
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    await asyncio.to_thread(urllib.request.urlopen, req, None, 10)
    producer = await client.create_producer(
        topic, batching_enabled=False, message_routing_mode="RoundRobinDistribution"
    )
    consumer = await client.subscribe(topic, "parts", initial_position="earliest")
    txn = await client.transaction(timeout=30)
    for i in range(9):
        await producer.send(f"k{i}".encode(), txn=txn)
    assert await _drain(consumer) == []
    most, least = txn.txn_id
    url = f"{txn_broker.web_url}/admin/v3/transactions/transactionMetadata/{most}/{least}"
    with await asyncio.to_thread(urllib.request.urlopen, url, None, 10) as resp:
        produced = json.loads(resp.read())["producedPartitions"]
    assert len(produced) > 1, produced  # the transaction spans several partitions
    await txn.commit()
    got = await _drain(consumer, 2000)
    assert sorted(got) == sorted(f"k{i}".encode() for i in range(9))


async def test_batched_messages_acked_one_by_one_in_transactions(client, topic):
    producer = await client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50)
    consumer = await client.subscribe(topic, "batch", consumer_type="Shared", initial_position="earliest")
    futs = [await producer.send_async(f"b{i}".encode()) for i in range(5)]
    await producer.flush()
    ids = [await f for f in futs]
    assert len({(m.ledger_id, m.entry_id) for m in ids}) == 1  # one entry, five messages
    msgs = [await consumer.receive(2000) for _ in range(5)]
    t1 = await client.transaction(timeout=30)
    await consumer.acknowledge(msgs[0], txn=t1)
    await consumer.acknowledge(msgs[1], txn=t1)
    t2 = await client.transaction(timeout=30)
    await consumer.acknowledge(msgs[2], txn=t2)
    with pytest.raises(TransactionConflict):
        await consumer.acknowledge(msgs[1], txn=t2)  # index 1 is t1's
    await t1.commit()
    await t2.abort()  # index 2 is available again: the entry comes back without 0 and 1
    again = sorted([(await consumer.receive(3000)).data() for _ in range(3)])
    assert again == [b"b2", b"b3", b"b4"]
    await _drain(consumer)
    async with client.transaction(timeout=30) as t3:
        for m in msgs[2:]:
            await consumer.acknowledge(m, txn=t3)
    await consumer.close()
    consumer = await client.subscribe(topic, "batch", consumer_type="Shared")
    assert await _drain(consumer) == []  # every index acknowledged: the entry is done
