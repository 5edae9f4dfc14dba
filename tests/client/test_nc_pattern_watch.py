"""magnetar.client pattern consumers: WATCH_TOPIC_LIST when the broker offers it, polling when not."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

from magnetar.client import Client, Timeout


async def _receive_until(consumer, want: bytes, limit_s: float):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            msg = await consumer.receive(200)
        except Timeout:
            continue
        await consumer.acknowledge(msg)
        if msg.data() == want:
            return msg, time.monotonic()
    raise AssertionError(f"{want!r} not received within {limit_s} s")


async def test_watcher_picks_up_a_new_matching_topic_quickly(client):
    prefix = f"pw{uuid.uuid4().hex[:6]}"
    first = f"persistent://public/default/{prefix}-one"
    p1 = await client.create_producer(first)
    await p1.send(b"first")
    pattern = re.compile(f"persistent://public/default/{prefix}-.*")
    # a 10-minute polling period: only the watcher can find the new topic in time
    c = await client.subscribe(pattern, "w", initial_position="earliest", pattern_auto_discovery_period=600)
    assert c.discovery.watching
    await _receive_until(c, b"first", 5)

    second = f"persistent://public/default/{prefix}-two"
    t0 = time.monotonic()
    p2 = await client.create_producer(second)
    await p2.send(b"second")
    msg, t1 = await _receive_until(c, b"second", 5)
    assert msg.topic_name() == second
    assert t1 - t0 < 5
    assert second in c._topics

    # a topic that does not match is not picked up
    other = await client.create_producer(f"persistent://public/default/x{prefix}-three")
    await other.send(b"other")
    await p1.close()
    await p2.close()
    await other.close()
    await asyncio.sleep(1.5)
    assert sorted(c._topics) == [first, second]
    await c.close()


async def test_pattern_consumer_polls_when_the_broker_has_no_watchers(tmp_path):
    from magnetar.testing.standalone import running_standalone

    props = {"enableBrokerSideSubscriptionPatternEvaluation": "false"}
    async with running_standalone(tmp_path / "data", props) as sa:
        client = Client(sa.broker_url, operation_timeout_seconds=10)
        try:
            prefix = f"pp{uuid.uuid4().hex[:6]}"
            pattern = re.compile(f"persistent://public/default/{prefix}-.*")
            c = await client.subscribe(
                pattern, "p", initial_position="earliest", pattern_auto_discovery_period=1
            )
            cnx_features = client.pool.connections[0].server_features
            assert "supports_topic_watchers" not in cnx_features
            assert not c.discovery.watching
            p = await client.create_producer(f"persistent://public/default/{prefix}-new")
            await p.send(b"polled")
            msg, _ = await _receive_until(c, b"polled", 8)
            assert msg.topic_name().endswith(f"{prefix}-new")
        finally:
            await client.close()
