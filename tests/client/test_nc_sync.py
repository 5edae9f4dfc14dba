"""magnetar.client.sync: the blocking facade (a loop in a thread) against a real standalone."""

from __future__ import annotations

import threading

import pytest

from magnetar.client import EARLIEST, MessageId, StringSchema, Timeout
from magnetar.client.sync import Client, Consumer, Producer, Reader


def test_produce_consume_read_without_asyncio(standalone, topic):
    client = Client(standalone.broker_url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, "s", initial_position="earliest")
        assert isinstance(consumer, Consumer)
        with client.create_producer(
            topic, batching_enabled=True, batching_max_publish_delay_ms=5
        ) as producer:
            assert isinstance(producer, Producer) and producer.topic() == topic
            mid = producer.send(b"one", properties={"k": "v"})
            assert isinstance(mid, MessageId)
            called = []
            futs = [
                producer.send_async(f"m{i}".encode(), lambda err, m: called.append(err)) for i in range(20)
            ]
            ids = [f.result(10) for f in futs]
            assert len(set(ids)) == 20 and called == [None] * 20
        got = [consumer.receive(5000) for _ in range(21)]
        assert [m.data() for m in got] == [b"one"] + [f"m{i}".encode() for i in range(20)]
        assert got[0].properties() == {"k": "v"}
        for m in got:
            consumer.acknowledge(m)
        with pytest.raises(Timeout):
            consumer.receive(200)

        reader = client.create_reader(topic, EARLIEST)
        assert isinstance(reader, Reader)
        seen = []
        for msg in reader:
            seen.append(msg.data())
            if not reader.has_message_available():
                break
        assert len(seen) == 21
        consumer.close()
    finally:
        client.close()
    assert not client._runner.thread.is_alive()


def test_threads_share_one_client_with_a_schema(standalone, topic):
    with Client(standalone.broker_url, operation_timeout_seconds=10) as client:
        consumer = client.subscribe(topic, "s", schema=StringSchema(), initial_position="earliest")
        producer = client.create_producer(topic, schema=StringSchema())

        def send(t: int) -> None:
            for i in range(10):
                producer.send(f"t{t}-{i}")

        threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        values = sorted(consumer.receive(5000).value() for _ in range(40))
        assert values == sorted(f"t{t}-{i}" for t in range(4) for i in range(10))
