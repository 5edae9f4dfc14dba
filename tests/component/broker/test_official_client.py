"""The official pulsar-client (blocking, run in a thread) against an in-process BrokerService."""

from __future__ import annotations

import asyncio

import pulsar
import pytest

from magnetar.broker.admin.topic_ops import TopicOps

pytestmark = pytest.mark.compat


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=10, connection_timeout_ms=5000)


async def test_produce_then_consume_in_order(broker) -> None:
    def run() -> list[bytes]:
        c = _client(broker.url)
        try:
            consumer = c.subscribe("t-basic", "sub", initial_position=pulsar.InitialPosition.Earliest)
            producer = c.create_producer("t-basic", batching_enabled=False)
            for i in range(20):
                producer.send(f"m-{i}".encode())
            got = []
            for _ in range(20):
                m = consumer.receive(timeout_millis=5000)
                got.append(m.data())
                consumer.acknowledge(m)
            return got
        finally:
            c.close()

    got = await asyncio.to_thread(run)
    assert got == [f"m-{i}".encode() for i in range(20)]


def _run(broker, fn):
    def wrapped():
        c = _client(broker.url)
        try:
            return fn(c)
        finally:
            c.close()

    return asyncio.to_thread(wrapped)


async def test_batching_and_compression_round_trip(broker) -> None:
    def fn(c: pulsar.Client) -> list[bytes]:
        consumer = c.subscribe("t-batch", "s", initial_position=pulsar.InitialPosition.Earliest)
        out = []
        for ct in (pulsar.CompressionType.LZ4, pulsar.CompressionType.ZSTD, pulsar.CompressionType.NONE):
            p = c.create_producer(
                "t-batch", compression_type=ct, batching_enabled=True, batching_max_messages=10
            )
            for i in range(25):
                p.send_async(f"{ct}-{i}".encode(), None)
            p.flush()
            p.close()
        for _ in range(75):
            m = consumer.receive(timeout_millis=5000)
            out.append(m.data())
            consumer.acknowledge(m)
        return out

    got = await _run(broker, fn)
    assert len(got) == 75 and len(set(got)) == 75


async def test_negative_acks_count_redeliveries_and_feed_the_dead_letter_topic(broker) -> None:
    def fn(c: pulsar.Client) -> tuple[list[int], bytes]:
        policy = pulsar.ConsumerDeadLetterPolicy(
            max_redeliver_count=2, dead_letter_topic="t-dlq-DLQ", initial_subscription_name="init"
        )
        dlq = c.subscribe("t-dlq-DLQ", "d", initial_position=pulsar.InitialPosition.Earliest)
        consumer = c.subscribe(
            "t-dlq",
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=100,
            dead_letter_policy=policy,
        )
        c.create_producer("t-dlq").send(b"poison")
        counts = []
        for _ in range(3):
            m = consumer.receive(timeout_millis=5000)
            counts.append(m.redelivery_count())
            consumer.negative_acknowledge(m)
        dead = dlq.receive(timeout_millis=10000)
        return counts, dead.data()

    counts, dead = await _run(broker, fn)
    assert counts == [0, 1, 2]
    assert dead == b"poison"


# The ack-timeout redelivery (10 s: the C++ client's minimum) is proven once, against the real
# standalone process: tests/compat/test_acks.py::test_ack_timeout_redelivers.


async def test_failover_takeover_when_the_active_consumer_closes(broker) -> None:
    def fn(c: pulsar.Client) -> tuple[int, int]:
        a = c.subscribe("t-fo", "s", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
        b = c.subscribe("t-fo", "s", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
        p = c.create_producer("t-fo", batching_enabled=False)
        for i in range(10):
            p.send(f"{i}".encode())
        got_a = 0
        for _ in range(10):
            m = a.receive(timeout_millis=5000)
            got_a += 1
            if got_a <= 5:
                a.acknowledge(m)
        a.close()
        got_b = 0
        while True:
            try:
                m = b.receive(timeout_millis=3000)
            except pulsar.Timeout:
                break
            got_b += 1
            b.acknowledge(m)
        return got_a, got_b

    got_a, got_b = await _run(broker, fn)
    assert got_a == 10 and got_b == 5


async def test_reader_from_a_message_id_and_has_message_available(broker) -> None:
    def fn(c: pulsar.Client):
        p = c.create_producer("t-reader", batching_enabled=False)
        ids = [p.send(f"{i}".encode()) for i in range(5)]
        r = c.create_reader("t-reader", ids[1])
        after = [r.read_next(5000).data() for _ in range(3)]
        more = r.has_message_available()
        r2 = c.create_reader("t-reader", ids[1], start_message_id_inclusive=True)
        incl = r2.read_next(5000).data()
        r3 = c.create_reader("t-reader", pulsar.MessageId.latest)
        latest_has = r3.has_message_available()
        r4 = c.create_reader("t-reader", pulsar.MessageId.earliest)
        first = r4.read_next(5000).data()
        last = c.subscribe("t-reader", "x").get_last_message_id()
        return after, more, incl, latest_has, first, str(last), str(ids[-1])

    after, more, incl, latest_has, first, last, last_sent = await _run(broker, fn)
    assert after == [b"2", b"3", b"4"]
    assert more is False
    assert incl == b"1"
    assert latest_has is False
    assert first == b"0"
    assert last.split(",")[:2] == last_sent.split(",")[:2]


async def test_seek_to_a_message_id_and_to_earliest(broker) -> None:
    def fn(c: pulsar.Client):
        consumer = c.subscribe("t-seek", "s")
        p = c.create_producer("t-seek", batching_enabled=False)
        ids = [p.send(f"{i}".encode()) for i in range(5)]
        for _ in range(5):
            consumer.acknowledge(consumer.receive(5000))
        consumer.seek(ids[2])
        a = consumer.receive(5000).data()
        consumer.seek(pulsar.MessageId.earliest)
        b = consumer.receive(5000).data()
        return a, b

    a, b = await _run(broker, fn)
    assert a in (b"2", b"3")  # exclusive/inclusive start per client version
    assert b == b"0"


async def test_partitioned_topic_round_robin(broker) -> None:
    await broker.service.create_partitioned_topic("persistent://public/default/t-part", 3)

    def fn(c: pulsar.Client):
        consumer = c.subscribe("t-part", "s", initial_position=pulsar.InitialPosition.Earliest)
        p = c.create_producer(
            "t-part",
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for i in range(30):
            p.send(f"{i}".encode())
        got = []
        for _ in range(30):
            m = consumer.receive(5000)
            got.append((m.topic_name(), m.data()))
            consumer.acknowledge(m)
        return got

    got = await _run(broker, fn)
    assert sorted(int(d) for _, d in got) == list(range(30))
    assert len({t for t, _ in got}) == 3
    stats = await TopicOps(broker.service).partitioned_topic_stats("persistent://public/default/t-part")
    assert stats["msgInCounter"] == 30 and stats["metadata"] == {"partitions": 3}


async def test_unknown_namespace_fails_with_an_error_not_a_timeout(broker) -> None:
    def fn(c: pulsar.Client):
        try:
            c.create_producer("persistent://nope/nope/t")
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return None

    name = await _run(broker, fn)
    assert name is not None and name != "Timeout"


async def test_batch_index_acks_survive_a_reconnect(broker) -> None:
    def fn(c: pulsar.Client) -> list[bytes]:
        consumer = c.subscribe("t-bidx", "s", batch_index_ack_enabled=True)
        p = c.create_producer(
            "t-bidx", batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=50
        )
        for i in range(5):
            p.send_async(f"{i}".encode(), None)
        p.flush()
        for i in range(5):
            m = consumer.receive(5000)
            if i in (0, 2):
                consumer.acknowledge(m)
        consumer.close()  # flushes the pending acks
        consumer = c.subscribe("t-bidx", "s", batch_index_ack_enabled=True)
        out = []
        while True:
            try:
                out.append(consumer.receive(2000).data())
            except pulsar.Timeout:
                return out

    assert await _run(broker, fn) == [b"1", b"3", b"4"]


async def test_seek_by_publish_time(broker) -> None:
    def fn(c: pulsar.Client) -> bytes:
        import time

        consumer = c.subscribe("t-seekt", "s")
        p = c.create_producer("t-seekt", batching_enabled=False)
        p.send(b"old")
        time.sleep(0.05)
        cut = int(time.time() * 1000)
        time.sleep(0.05)
        p.send(b"new")
        for _ in range(2):
            consumer.acknowledge(consumer.receive(5000))
        consumer.seek(cut)
        return consumer.receive(5000).data()

    assert await _run(broker, fn) == b"new"


async def test_unload_makes_clients_reconnect_and_carry_on(broker) -> None:
    loop = asyncio.get_running_loop()

    def fn(c: pulsar.Client) -> list[bytes]:
        consumer = c.subscribe("t-unload", "s")
        p = c.create_producer("t-unload", batching_enabled=False)
        for i in range(5):
            p.send(f"{i}".encode())
        asyncio.run_coroutine_threadsafe(TopicOps(broker.service).unload_topic("t-unload"), loop).result(10)
        for i in range(5, 10):
            p.send(f"{i}".encode())
        out = []
        for _ in range(10):
            m = consumer.receive(10000)
            out.append(m.data())
            consumer.acknowledge(m)
        return out

    got = await _run(broker, fn)
    assert got == [f"{i}".encode() for i in range(10)]


async def test_schemas_are_versioned_and_checked(broker) -> None:
    from pulsar.schema import JsonSchema, Record, String, StringSchema

    class Rec(Record):
        name = String()

    def fn(c: pulsar.Client):
        consumer = c.subscribe("t-schema", "s", schema=StringSchema())
        p = c.create_producer("t-schema", schema=StringSchema())
        p.send("hello")
        value = consumer.receive(5000).value()
        try:
            c.create_producer("t-schema", schema=JsonSchema(Rec))
        except Exception as exc:  # noqa: BLE001
            refused = type(exc).__name__
        else:
            refused = None
        return value, refused

    value, refused = await _run(broker, fn)
    assert value == "hello"
    assert refused is not None and "Incompatible" in refused


async def test_regex_subscription_finds_topics(broker) -> None:
    import re

    def fn(c: pulsar.Client) -> set[bytes]:
        for name in ("rx-a", "rx-b"):
            c.create_producer(name).close()
        consumer = c.subscribe(
            re.compile("persistent://public/default/rx-.*"),
            "s",
            initial_position=pulsar.InitialPosition.Earliest,
            pattern_auto_discovery_period=1,
        )
        for name in ("rx-a", "rx-b"):
            c.create_producer(name).send(name.encode())
        return {consumer.receive(5000).data() for _ in range(2)}

    assert await _run(broker, fn) == {b"rx-a", b"rx-b"}


async def test_a_chunked_message_goes_through(broker) -> None:
    def fn(c: pulsar.Client) -> int:
        consumer = c.subscribe("t-chunk", "s")
        p = c.create_producer("t-chunk", chunking_enabled=True, batching_enabled=False)
        p.send(b"z" * (6 * 1024 * 1024))
        return len(consumer.receive(10000).data())

    assert await _run(broker, fn) == 6 * 1024 * 1024
