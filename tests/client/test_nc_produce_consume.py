"""magnetar.client producer and consumer basics against a real standalone."""

from __future__ import annotations

import asyncio
import time

import pytest
from nc_helpers import create_partitioned

from magnetar.client import (
    Client,
    CompressionType,
    ConsumerType,
    InvalidConfiguration,
    MessageTooBig,
    NotSupported,
    ProducerBusy,
    ProducerFenced,
    ProducerQueueIsFull,
    StringSchema,
    Timeout,
)
from magnetar.client.errors import ConnectError, TopicNotFound


async def _drain(consumer, n, timeout_ms=5000):
    out = []
    for _ in range(n):
        msg = await consumer.receive(timeout_ms)
        await consumer.acknowledge(msg)
        out.append(msg)
    return out


@pytest.mark.parametrize("batching", [True, False])
@pytest.mark.parametrize("compression", ["NONE", "LZ4", "zlib", "ZSTD", "snappy"])
async def test_round_trip_keys_properties_event_time(client, topic, batching, compression):
    consumer = await client.subscribe(topic, "sub", initial_position="earliest")
    producer = await client.create_producer(
        topic, batching_enabled=batching, compression_type=compression, batching_max_publish_delay_ms=5
    )
    futs = [
        await producer.send_async(
            f"payload-{i}".encode() * 20,
            properties={"i": str(i)},
            partition_key=f"k{i % 3}",
            ordering_key=b"ok",
            event_timestamp=1000 + i,
        )
        for i in range(50)
    ]
    ids = await asyncio.gather(*futs)
    assert len(set(ids)) == 50 and ids == sorted(ids)
    if batching:
        assert ids[0].batch_index >= 0
    msgs = await _drain(consumer, 50)
    assert [m.data() for m in msgs] == [f"payload-{i}".encode() * 20 for i in range(50)]
    assert [m.message_id() for m in msgs] == ids
    m = msgs[7]
    assert m.properties() == {"i": "7"} and m.partition_key() == "k1" and m.ordering_key() == b"ok"
    assert m.event_timestamp() == 1007 and m.topic_name() == topic and m.redelivery_count() == 0
    assert abs(m.publish_timestamp() - time.time() * 1000) < 60_000
    assert m.producer_name() == producer.producer_name()
    with pytest.raises(Timeout):
        await consumer.receive(100)


async def test_chunking_large_message(client, topic):
    consumer = await client.subscribe(topic, "sub", initial_position="earliest")
    producer = await client.create_producer(topic, chunking_enabled=True)
    big = bytes(range(256)) * (6 * 1024 * 1024 // 256)  # 6 MiB > the 5 MiB max message size
    mid = await producer.send(big)
    assert mid.first_chunk is not None and mid.first_chunk < mid
    await producer.send(b"after")
    msg = await consumer.receive(10_000)
    assert msg.data() == big and msg.message_id() == mid
    await consumer.acknowledge(msg)
    assert (await consumer.receive(5000)).data() == b"after"
    plain = await client.create_producer(topic, batching_enabled=False)
    with pytest.raises(MessageTooBig):
        await plain.send(big)


async def test_sequence_ids_names_and_dedup_fields(client, topic):
    producer = await client.create_producer(topic, producer_name="my-prod", batching_enabled=False)
    assert producer.producer_name() == "my-prod"
    await producer.send(b"a")
    await producer.send(b"b", sequence_id=10)
    assert producer.last_sequence_id() == 10
    await producer.close()
    again = await client.create_producer(topic, producer_name="my-prod", batching_enabled=False)
    consumer = await client.subscribe(topic, "s", initial_position="earliest")
    msgs = await _drain(consumer, 2)
    assert [m.sequence_id() for m in msgs] == [0, 10]
    await again.send(b"c")
    # without deduplication the broker reports last_sequence_id -1, so a new producer starts at 0
    assert (await consumer.receive(5000)).sequence_id() == 0


async def test_access_modes_and_typed_errors(client, topic):
    first = await client.create_producer(topic, producer_name="p1", access_mode="Exclusive")
    with pytest.raises((ProducerBusy, ProducerFenced)):
        await client.create_producer(topic, access_mode="exclusive")
    await first.close()
    again = await client.create_producer(topic, access_mode=2)  # WaitForExclusive, free now
    await again.send(b"x")
    with pytest.raises(InvalidConfiguration):
        await client.create_producer(topic, compression_type="gzip")
    with pytest.raises(InvalidConfiguration):  # transactions come from client.transaction()
        await again.send(b"x", txn=object())
    with pytest.raises(NotSupported):
        await client.subscribe(topic, "s", message_listener=lambda c, m: None)


async def test_queue_full_and_blocking(client, topic):
    p = await client.create_producer(topic, max_pending_messages=2, batching_enabled=True,
                                     batching_max_publish_delay_ms=500)  # fmt: skip
    await p.send_async(b"1")
    await p.send_async(b"2")
    with pytest.raises(ProducerQueueIsFull):
        await p.send_async(b"3")
    await p.flush()
    blocking = await client.create_producer(topic, max_pending_messages=1, block_if_queue_full=True)
    futs = [await blocking.send_async(str(i).encode()) for i in range(20)]
    assert len(await asyncio.gather(*futs)) == 20


async def test_string_schema_and_async_for(client, topic):
    producer = await client.create_producer(topic, schema=StringSchema())
    consumer = await client.subscribe(topic, "s", schema=StringSchema(), consumer_type=ConsumerType.Shared,
                                      initial_position="Earliest")  # fmt: skip
    for i in range(5):
        await producer.send(f"héllo {i}")
    got = []
    async for msg in consumer:
        got.append(msg.value())
        await consumer.acknowledge(msg)
        if len(got) == 5:
            break
    assert got == [f"héllo {i}" for i in range(5)]


async def test_partitioned_round_robin_and_partition_ids(standalone, client, topic):
    create_partitioned(standalone, topic, 3)
    consumer = await client.subscribe(topic, "s", initial_position="earliest")
    producer = await client.create_producer(topic, batching_enabled=False)
    assert producer.num_partitions == 3
    ids = [await producer.send(str(i).encode()) for i in range(30)]
    assert {m.partition for m in ids} == {0, 1, 2}
    msgs = await _drain(consumer, 30)
    assert sorted(m.data() for m in msgs) == sorted(str(i).encode() for i in range(30))
    assert {m.topic_name() for m in msgs} == {f"{topic}-partition-{i}" for i in range(3)}
    keyed = [await producer.send(b"k", partition_key="same-key") for _ in range(5)]
    assert len({m.partition for m in keyed}) == 1


async def test_deliver_after_delays_shared_delivery(client, topic):
    consumer = await client.subscribe(topic, "s", consumer_type="Shared", initial_position="earliest")
    producer = await client.create_producer(topic)
    t0 = time.monotonic()
    await producer.send(b"later", deliver_after=1.5)
    await producer.send(b"now")
    assert (await consumer.receive(5000)).data() == b"now"
    msg = await consumer.receive(10_000)
    assert msg.data() == b"later" and time.monotonic() - t0 >= 1.2


async def test_bad_urls_and_closed_client(standalone, topic):
    with pytest.raises(InvalidConfiguration):
        Client("kafka://x:1")
    c = Client("pulsar://127.0.0.1:1", operation_timeout_seconds=2, connection_timeout_ms=1000)
    with pytest.raises(ConnectError):
        await c.create_producer(topic)
    await c.close()
    c = Client(standalone.broker_url)
    with pytest.raises(TopicNotFound):
        await c.subscribe("persistent://nosuchtenant/ns/t", "s")
    await c.close()
    from magnetar.client import AlreadyClosed

    with pytest.raises(AlreadyClosed):
        await c.create_producer(topic)


def test_enum_names_are_accepted():
    from magnetar.client.types import InitialPosition, coerce

    assert coerce(ConsumerType, "key_shared") is ConsumerType.KeyShared
    assert coerce(ConsumerType, "KeyShared") is ConsumerType.KeyShared
    assert coerce(InitialPosition, "earliest") is InitialPosition.Earliest
    assert coerce(CompressionType, "ZLIB") is CompressionType.ZLib
    with pytest.raises(InvalidConfiguration, match="one of"):
        coerce(ConsumerType, "nope")


async def test_http_service_url_lookup_and_partitions(standalone, topic):
    create_partitioned(standalone, topic, 2)
    c = Client(standalone.web_url, operation_timeout_seconds=10)
    try:
        assert await c.get_topic_partitions(topic) == [f"{topic}-partition-0", f"{topic}-partition-1"]
        consumer = await c.subscribe(topic, "s", initial_position="earliest")
        producer = await c.create_producer(topic, batching_enabled=False)
        for i in range(4):
            await producer.send(str(i).encode())
        got = sorted([(await consumer.receive(5000)).data() for _ in range(4)])
        assert got == [b"0", b"1", b"2", b"3"]
    finally:
        await c.close()


async def test_client_memory_limit_blocks_or_fails(standalone, topic):
    from magnetar.client import MemoryBufferIsFull

    c = Client(standalone.broker_url, memory_limit_bytes=10_000)
    try:
        slow = await c.create_producer(topic, batching_max_publish_delay_ms=300, max_pending_messages=100)
        await slow.send_async(b"x" * 6000)
        with pytest.raises(MemoryBufferIsFull):
            await slow.send_async(b"y" * 6000)
        other = await c.create_producer(topic, block_if_queue_full=True, batching_enabled=False)
        fut = await other.send_async(b"z" * 6000)  # waits until the first batch is stored
        assert c.memory.used_bytes <= 10_000
        await fut
        await slow.flush()
        assert c.memory.used_bytes == 0
    finally:
        await c.close()


async def test_new_partitions_are_picked_up(standalone, topic):
    from nc_helpers import admin

    create_partitioned(standalone, topic, 2)
    c = Client(standalone.broker_url, partitions_update_interval_seconds=0.5)
    try:
        consumer = await c.subscribe(topic, "s", initial_position="earliest")
        producer = await c.create_producer(topic, batching_enabled=False)
        local = topic.rsplit("/", 1)[1]
        status, body = admin(standalone, "POST", f"/admin/v2/persistent/public/default/{local}/partitions", 4)
        assert status == 204, body
        await asyncio.sleep(1.5)
        assert producer.num_partitions == 4
        ids = [await producer.send(str(i).encode()) for i in range(12)]
        assert {m.partition for m in ids} == {0, 1, 2, 3}
        got = {(await consumer.receive(5000)).topic_name() for _ in range(12)}
        assert got == {f"{topic}-partition-{i}" for i in range(4)}
    finally:
        await c.close()


async def test_exclusive_with_fencing_fences_the_old_producer(client, topic):
    old = await client.create_producer(topic, access_mode="Exclusive", batching_enabled=False)
    await old.send(b"before")
    new = await client.create_producer(topic, access_mode="ExclusiveWithFencing", batching_enabled=False)
    await new.send(b"after")
    # the broker closed the old one; its re-registration is refused with a typed error, not a timeout
    with pytest.raises((ProducerFenced, ProducerBusy)):
        await asyncio.wait_for(old.send(b"fenced"), 15)


async def test_send_async_callback(client, topic):
    producer = await client.create_producer(topic)
    results = []
    futs = [await producer.send_async(b"x", lambda err, mid: results.append((err, mid))) for _ in range(3)]
    ids = await asyncio.gather(*futs)
    assert results == [(None, mid) for mid in ids]
