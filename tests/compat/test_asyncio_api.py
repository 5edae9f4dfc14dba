"""The official client's asyncio API (``pulsar.asyncio``, pulsar-client >= 3.6) against standalone.

Each test runs its own event loop with ``asyncio.run`` so the C++ client's
callbacks land on a loop that lives exactly as long as the test.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid

import pytest

pulsar = pytest.importorskip("pulsar")
pa = pytest.importorskip("pulsar.asyncio")

pytestmark = pytest.mark.compat

RECEIVE_TIMEOUT_S = 10


def _run(standalone, body):
    async def main():
        client = pa.Client(standalone.broker_url, operation_timeout_seconds=10)
        try:
            return await asyncio.wait_for(body(client), 60)
        finally:
            await client.close()

    return asyncio.run(main())


async def _receive(consumer):
    return await asyncio.wait_for(consumer.receive(), RECEIVE_TIMEOUT_S)


def test_roundtrip_batched(standalone, topic):
    async def body(c):
        consumer = await c.subscribe(topic, "async-sub")
        producer = await c.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
        ids = await asyncio.gather(*(producer.send(f"m{i}".encode()) for i in range(20)))
        out = []
        for _ in range(20):
            msg = await _receive(consumer)
            out.append(msg.data())
            await consumer.acknowledge(msg)
        await producer.close()
        await consumer.close()
        return ids, out

    ids, out = _run(standalone, body)
    assert out == [f"m{i}".encode() for i in range(20)]
    assert len({(i.ledger_id(), i.entry_id(), i.batch_index()) for i in ids}) == 20


def test_shared_split_and_cumulative_ack(standalone, topic):
    async def body(c):
        kw = dict(consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=5)
        c1 = await c.subscribe(topic, "sh", **kw)
        c2 = await c.subscribe(topic, "sh", **kw)
        producer = await c.create_producer(topic, batching_enabled=False)
        for i in range(20):
            await producer.send(f"m{i}".encode())
        got: dict[str, list[bytes]] = {"c1": [], "c2": []}

        async def drain(name, cons):
            while True:
                try:
                    msg = await asyncio.wait_for(cons.receive(), 1.5)
                except TimeoutError:
                    return
                got[name].append(msg.data())
                await cons.acknowledge(msg)

        await asyncio.gather(drain("c1", c1), drain("c2", c2))
        for x in (c1, c2, producer):
            await x.close()
        return got

    got = _run(standalone, body)
    assert sorted(got["c1"] + got["c2"]) == sorted(f"m{i}".encode() for i in range(20))
    assert got["c1"] and got["c2"]


def test_negative_ack_and_seek(standalone, topic):
    async def body(c):
        consumer = await c.subscribe(
            topic, "n", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
        )
        producer = await c.create_producer(topic, batching_enabled=False)
        first_id = await producer.send(b"a")
        await producer.send(b"b")
        m = await _receive(consumer)
        await consumer.negative_acknowledge(m)
        b = await _receive(consumer)
        await consumer.acknowledge(b)
        again = await _receive(consumer)
        counts = (m.data(), again.data(), again.redelivery_count())
        await consumer.acknowledge(again)
        await consumer.seek(first_id)
        replay = await _receive(consumer)
        await producer.close()
        await consumer.close()
        return counts, replay.data()

    counts, replay = _run(standalone, body)
    assert counts == (b"a", b"a", 1)
    assert replay in (b"a", b"b")


def test_reader_and_partitions(standalone):
    local = f"apt-{uuid.uuid4().hex[:8]}"
    req = urllib.request.Request(
        f"{standalone.web_url}/admin/v2/persistent/public/default/{local}/partitions",
        data=b"2",
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).close()
    topic = f"persistent://public/default/{local}"

    async def body(c):
        parts = await c.get_topic_partitions(topic)
        producer = await c.create_producer(topic, batching_enabled=False)
        for i in range(6):
            await producer.send(f"p{i}".encode())
        await producer.close()
        reader = await c.create_reader(f"{topic}-partition-0", pulsar.MessageId.earliest)
        first = await asyncio.wait_for(reader.read_next(), RECEIVE_TIMEOUT_S)
        await reader.close()
        return parts, first.data()

    parts, first = _run(standalone, body)
    assert parts == [f"{topic}-partition-0", f"{topic}-partition-1"]
    assert first.startswith(b"p")
    with urllib.request.urlopen(
        f"{standalone.web_url}/admin/v2/persistent/public/default/{local}/partitions", timeout=10
    ) as r:
        assert json.loads(r.read()) == {"partitions": 2}
