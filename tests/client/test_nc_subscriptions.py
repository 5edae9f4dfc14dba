"""magnetar.client consumers: subscription types, acks, nacks, ack timeout, DLQ, seek, multi-topic, regex."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
from nc_helpers import create_partitioned

from magnetar.client import ConsumerBusy, ConsumerDeadLetterPolicy, InvalidConfiguration, Timeout


async def _produce(client, topic, n, **kw):
    p = await client.create_producer(topic, **kw)
    ids = await asyncio.gather(*[await p.send_async(f"m{i}".encode()) for i in range(n)])
    await p.close()
    return ids


async def _receive_all(consumer, timeout_ms=1000, ack=True):
    out = []
    while True:
        try:
            msg = await consumer.receive(timeout_ms)
        except Timeout:
            return out
        out.append(msg)
        if ack:
            await consumer.acknowledge(msg)


async def test_exclusive_rejects_second_consumer_failover_and_shared(client, topic):
    await client.subscribe(topic, "ex", consumer_type="Exclusive")
    with pytest.raises(ConsumerBusy):
        await client.subscribe(topic, "ex", consumer_type="Exclusive")
    a = await client.subscribe(topic, "sh", consumer_type="Shared", receiver_queue_size=10)
    b = await client.subscribe(topic, "sh", consumer_type="Shared", receiver_queue_size=10)
    f1 = await client.subscribe(topic, "fo", consumer_type="Failover", consumer_name="a")
    f2 = await client.subscribe(topic, "fo", consumer_type="Failover", consumer_name="b")
    await _produce(client, topic, 100, batching_enabled=False)
    got_a, got_b = await asyncio.gather(_receive_all(a), _receive_all(b))
    assert len(got_a) + len(got_b) == 100 and got_a and got_b
    fo_a, fo_b = await asyncio.gather(_receive_all(f1), _receive_all(f2))
    assert sorted([len(fo_a), len(fo_b)]) == [0, 100]  # one active consumer gets everything


async def test_key_shared_keeps_keys_on_one_consumer(client, topic):
    c1 = await client.subscribe(topic, "ks", consumer_type="KeyShared")
    c2 = await client.subscribe(topic, "ks", consumer_type="key_shared")
    p = await client.create_producer(topic, batching_enabled=False)
    for i in range(60):
        await p.send_async(str(i).encode(), partition_key=f"key-{i % 6}")
    await p.flush()
    r1, r2 = await asyncio.gather(_receive_all(c1), _receive_all(c2))
    k1, k2 = {m.partition_key() for m in r1}, {m.partition_key() for m in r2}
    assert len(r1) + len(r2) == 60 and not (k1 & k2)


async def test_cumulative_ack_and_redelivery_of_unacked(client, topic):
    c = await client.subscribe(topic, "s", initial_position="earliest")
    await _produce(client, topic, 10, batching_enabled=False)
    msgs = [await c.receive(5000) for _ in range(10)]
    await c.acknowledge_cumulative(msgs[5])
    await c.close()
    c = await client.subscribe(topic, "s")
    rest = await _receive_all(c)
    assert [m.data() for m in rest] == [f"m{i}".encode() for i in range(6, 10)]
    shared = await client.subscribe(topic, "sh", consumer_type="Shared")
    with pytest.raises(InvalidConfiguration):
        await shared.acknowledge_cumulative(rest[0].message_id())


async def test_batch_acks_whole_and_by_index(client, topic):
    for index_acks in (False, True):
        sub = f"b-{index_acks}"
        c = await client.subscribe(
            topic, sub, initial_position="earliest", batch_index_ack_enabled=index_acks
        )
        await c.close()
    await _produce(client, topic, 5, batching_enabled=True, batching_max_publish_delay_ms=50)
    for index_acks in (False, True):
        sub = f"b-{index_acks}"
        c = await client.subscribe(topic, sub, batch_index_ack_enabled=index_acks)
        msgs = [await c.receive(5000) for _ in range(5)]
        assert {m.message_id().batch_size for m in msgs} == {5}
        for m in msgs[:2]:
            await c.acknowledge(m)
        await asyncio.sleep(0.3)  # let the grouped acks go out
        await c.close()
        c = await client.subscribe(topic, sub)
        again = await _receive_all(c, ack=False)
        # without batch-index acks the whole batch comes back; the broker may also filter by ack_set
        assert [m.data() for m in again][-3:] == [b"m2", b"m3", b"m4"]
        for m in again:
            await c.acknowledge(m)
        await asyncio.sleep(0.3)
        await c.close()
        c = await client.subscribe(topic, sub)
        assert await _receive_all(c, timeout_ms=500) == []
        await c.close()


async def test_negative_ack_redelivers_with_counts_then_dead_letter(client, topic):
    dlq = f"{topic}-my-dlq"
    dlq_consumer = await client.subscribe(dlq, "dlq-sub")
    c = await client.subscribe(
        topic, "s", consumer_type="Shared", negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=ConsumerDeadLetterPolicy(max_redeliver_count=2, dead_letter_topic=dlq),
    )  # fmt: skip
    p = await client.create_producer(topic, batching_enabled=False)
    await p.send(b"poison", properties={"x": "1"})
    counts = []
    for _ in range(3):
        msg = await c.receive(5000)
        counts.append(msg.redelivery_count())
        await c.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    dead = await dlq_consumer.receive(5000)
    assert dead.data() == b"poison" and dead.properties()["x"] == "1"
    assert dead.properties()["REAL_TOPIC"] == topic
    with pytest.raises(Timeout):
        await c.receive(500)


async def test_ack_timeout_redelivers(client, topic):
    c = await client.subscribe(topic, "s", consumer_type="Shared", unacked_messages_timeout_ms=300)
    await _produce(client, topic, 1, batching_enabled=False)
    first = await c.receive(5000)
    t0 = time.monotonic()
    second = await c.receive(5000)
    assert second.data() == first.data() and second.redelivery_count() == 1
    assert time.monotonic() - t0 >= 0.2
    await c.acknowledge(second)
    with pytest.raises(Timeout):
        await c.receive(800)


async def test_seek_by_id_and_time(client, topic):
    c = await client.subscribe(topic, "s", initial_position="earliest")
    ids = await _produce(client, topic, 10, batching_enabled=False)
    await _receive_all(c)
    await c.seek(ids[3])
    assert [m.data() for m in await _receive_all(c)] == [f"m{i}".encode() for i in range(3, 10)]
    await c.seek(0)  # publish time 0: from the beginning
    assert len(await _receive_all(c)) == 10
    await c.seek(int(time.time() * 1000) + 60_000)
    assert await _receive_all(c, timeout_ms=500) == []


async def test_multi_topic_and_partitioned(standalone, client, topic):
    t1, t2 = f"{topic}-a", f"{topic}-b"
    create_partitioned(standalone, t2, 2)
    c = await client.subscribe([t1, t2], "multi", initial_position="earliest")
    await _produce(client, t1, 5)
    await _produce(client, t2, 6, batching_enabled=False)
    got = await _receive_all(c)
    assert len(got) == 11
    assert {m.topic_name() for m in got} == {t1, f"{t2}-partition-0", f"{t2}-partition-1"}


async def test_regex_consumer_discovers_new_topics(client):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = f"persistent://public/default/{prefix}-one"
    await _produce(client, first, 1)
    pattern = re.compile(f"persistent://public/default/{prefix}-.*")
    c = await client.subscribe(pattern, "rx", initial_position="earliest", pattern_auto_discovery_period=1)
    assert (await c.receive(5000)).data() == b"m0"
    second = f"persistent://public/default/{prefix}-two"
    p = await client.create_producer(second)
    await asyncio.sleep(2.5)  # discovery subscribes (at Earliest)
    await p.send(b"new")
    msg = await c.receive(5000)
    assert msg.data() == b"new" and msg.topic_name() == second


async def test_zero_queue_consumer(client, topic):
    c = await client.subscribe(topic, "z", receiver_queue_size=0, initial_position="earliest")
    await _produce(client, topic, 3, batching_enabled=False)
    assert [(await c.receive(5000)).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]


async def test_key_based_batching_gives_one_key_per_batch(client, topic):
    c1 = await client.subscribe(topic, "ks", consumer_type="KeyShared")
    c2 = await client.subscribe(topic, "ks", consumer_type="KeyShared")
    p = await client.create_producer(topic, batching_type="KeyBased", batching_max_publish_delay_ms=20)
    futs = [await p.send_async(str(i).encode(), partition_key=f"key-{i % 4}") for i in range(40)]
    ids = await asyncio.gather(*futs)
    assert len({(m.ledger_id, m.entry_id) for m in ids}) >= 4  # at least one batch per key
    r1, r2 = await asyncio.gather(_receive_all(c1), _receive_all(c2))
    k1, k2 = {m.partition_key() for m in r1}, {m.partition_key() for m in r2}
    assert len(r1) + len(r2) == 40 and not (k1 & k2)
    for got in (r1, r2):  # per key, in send order
        for key in {m.partition_key() for m in got}:
            seq = [int(m.data()) for m in got if m.partition_key() == key]
            assert seq == sorted(seq)


async def test_negative_ack_backoff_grows_with_redelivery_count(client, topic):
    from magnetar.client import MultiplierRedeliveryBackoff

    backoff = MultiplierRedeliveryBackoff(min_delay_ms=200, max_delay_ms=5000, multiplier=3)
    c = await client.subscribe(topic, "s", consumer_type="Shared", negative_ack_redelivery_backoff=backoff)
    await _produce(client, topic, 1, batching_enabled=False)
    times = []
    for _ in range(3):
        msg = await c.receive(10_000)
        times.append(time.monotonic())
        await c.negative_acknowledge(msg)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.15 and gaps[1] >= 0.5  # 200 ms, then 600 ms
    assert gaps[1] > gaps[0]


async def test_reconsume_later_through_the_retry_topic_then_dead_letter(client, topic):
    dlq = await client.subscribe(f"{topic}-s-DLQ", "d")
    c = await client.subscribe(
        topic, "s", consumer_type="Shared", retry_enable=True,
        dead_letter_policy=ConsumerDeadLetterPolicy(max_redeliver_count=2),
    )  # fmt: skip
    p = await client.create_producer(topic)
    await p.send(b"again", properties={"a": "1"})
    seen = []
    t0 = time.monotonic()
    for _ in range(3):
        msg = await c.receive(10_000)
        seen.append((msg.topic_name(), msg.properties().get("RECONSUMETIMES")))
        await c.reconsume_later(msg, 300)
    assert seen == [(topic, None), (f"{topic}-s-RETRY", "1"), (f"{topic}-s-RETRY", "2")]
    assert time.monotonic() - t0 >= 0.5  # two delayed redeliveries
    dead = await dlq.receive(5000)
    assert dead.data() == b"again" and dead.properties()["RECONSUMETIMES"] == "3"
    assert dead.properties()["a"] == "1" and dead.properties()["REAL_TOPIC"] == topic


async def test_batch_receive(client, topic):
    c = await client.subscribe(topic, "s", initial_position="earliest")
    await _produce(client, topic, 25)
    first = await c.batch_receive(max_num_messages=10, timeout_ms=2000)
    assert [m.data() for m in first] == [f"m{i}".encode() for i in range(10)]
    rest = await c.batch_receive(max_num_messages=100, timeout_ms=300)
    assert len(rest) == 15
    assert await c.batch_receive(timeout_ms=100) == []


async def test_dead_letter_initial_subscription_keeps_messages(client, topic):
    c = await client.subscribe(
        topic, "s", consumer_type="Shared", negative_ack_redelivery_delay_ms=50,
        dead_letter_policy=ConsumerDeadLetterPolicy(max_redeliver_count=1, initial_subscription_name="keep"),
    )  # fmt: skip
    p = await client.create_producer(topic, batching_enabled=False)
    await p.send(b"lost?")
    for _ in range(2):
        await c.negative_acknowledge(await c.receive(5000))
    await asyncio.sleep(1.0)  # the DLQ producer created "keep" before publishing
    late = await client.subscribe(f"{topic}-s-DLQ", "keep")  # Latest, but the subscription exists
    assert (await late.receive(5000)).data() == b"lost?"


async def test_unimplemented_options_raise(client, topic):
    from magnetar.client import NotSupported

    with pytest.raises(NotSupported):
        await client.create_producer(topic, lazy_start_partitioned_producers=True)
    with pytest.raises(NotSupported):
        await client.create_producer(topic, encryption_key="k")
    with pytest.raises(NotSupported):
        await client.create_reader(topic, "earliest", reader_listener=lambda r, m: None)
