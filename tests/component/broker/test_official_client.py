"""The official pulsar-client (blocking, run in a thread) against an in-process BrokerService."""

from __future__ import annotations

import asyncio

import pulsar
import pytest

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
