"""read_compacted subscriptions and transactions: aborted and uncommitted messages stay invisible.

Against the module's real ``magnetar standalone`` (tests/txn/conftest.py).  The compacted view
is the compacted ledger up to the horizon, then the live topic: the compactor never compacts
past the max-read position nor keeps an aborted message, and the live part goes through the
transaction buffer as a plain subscription does.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

from magnetar.client.errors import Timeout


def _rest(url: str, method: str = "GET") -> object:
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


async def compact(broker, topic: str) -> None:
    url = f"{broker.web_url}/admin/v2/{topic.replace('://', '/')}/compaction"
    await asyncio.to_thread(_rest, url, "PUT")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = await asyncio.to_thread(_rest, url)
        if status["status"] in ("SUCCESS", "ERROR"):
            assert status["status"] == "SUCCESS", status
            return
        await asyncio.sleep(0.2)
    raise AssertionError("compaction did not finish")


async def drain(consumer, wait_ms: int = 1500) -> list[tuple[str, bytes]]:
    out = []
    while True:
        try:
            msg = await consumer.receive(wait_ms)
        except Timeout:
            return out
        out.append((msg.partition_key(), msg.data()))
        await consumer.acknowledge(msg)


async def test_read_compacted_hides_aborted_and_open(client, topic, txn_broker):
    producer = await client.create_producer(topic, batching_enabled=False)
    await client.subscribe(topic, "hold", initial_position="earliest")  # keeps the data
    await producer.send(b"v1", partition_key="k1")
    aborted = await client.transaction(timeout=30)
    await producer.send(b"aborted", partition_key="k1", txn=aborted)
    await producer.send(b"aborted", partition_key="k9", txn=aborted)
    await aborted.abort()
    left_open = await client.transaction(timeout=60)
    await producer.send(b"open", partition_key="k2", txn=left_open)
    await producer.send(b"v3", partition_key="k3")
    await compact(txn_broker, topic)  # up to the open transaction only

    view = await client.subscribe(topic, "view", initial_position="earliest", is_read_compacted=True)
    assert await drain(view) == [("k1", b"v1")]  # not the aborted value, not past the open one
    await left_open.commit()
    assert await drain(view, 3000) == [("k2", b"open"), ("k3", b"v3")]

    await compact(txn_broker, topic)  # now over everything: the aborted values never come back
    again = await client.subscribe(topic, "again", initial_position="earliest", is_read_compacted=True)
    assert await drain(again, 3000) == [("k1", b"v1"), ("k2", b"open"), ("k3", b"v3")]
