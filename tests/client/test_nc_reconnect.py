"""Reconnects: a broker restart in the middle of producing and consuming loses no message."""

from __future__ import annotations

import asyncio

from magnetar.client import Client, Timeout
from magnetar.testing.standalone import StandaloneProcess


async def test_broker_restart_loses_no_message(tmp_path):
    proc = StandaloneProcess(tmp_path / "data")
    proc.start()
    client = Client(proc.broker_url, operation_timeout_seconds=10)
    topic = "persistent://public/default/restart-me"
    try:
        consumer = await client.subscribe(topic, "s", initial_position="earliest")
        producer = await client.create_producer(
            topic, batching_max_publish_delay_ms=2, send_timeout_millis=60_000
        )
        futs = [await producer.send_async(f"a{i}".encode()) for i in range(200)]
        await asyncio.gather(*futs)
        got = set()
        for _ in range(100):
            msg = await consumer.receive(5000)
            got.add(msg.data())
            await consumer.acknowledge(msg)
        await asyncio.sleep(0.3)  # grouped acks reach the broker
        await asyncio.to_thread(proc.terminate)
        # sends while the broker is down wait in the pending queue and go out after the reconnect
        during = [await producer.send_async(f"b{i}".encode()) for i in range(100)]
        await asyncio.to_thread(proc.restart)
        ids = await asyncio.wait_for(asyncio.gather(*during), 60)
        assert len(ids) == 100
        assert producer.is_connected()
        while True:
            try:
                msg = await consumer.receive(3000)
            except Timeout:
                break
            got.add(msg.data())
            await consumer.acknowledge(msg)
        expected = {f"a{i}".encode() for i in range(200)} | {f"b{i}".encode() for i in range(100)}
        assert got == expected
        assert consumer.is_connected()
    finally:
        await client.close()
        proc.terminate()
