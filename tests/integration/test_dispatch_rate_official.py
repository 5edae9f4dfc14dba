# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Dispatch rate limits hold on Key_Shared and read_compacted subscriptions (official client).

Both used to bypass the limit (their dispatchers had their own copy of the
dispatch round), and the limit counted entries, so a batched topic got
``batch size`` times the rate.  One standalone, the official client, the
policy written over the admin REST to live subscriptions.
"""

from __future__ import annotations

import time

import httpx
import pulsar

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"
NS = "public/default"
RATE = {"dispatchThrottlingRateInByte": -1, "relativeToPublishRate": False, "ratePeriodInSecond": 1}
WINDOW_S = 2.5


def _received_in(consumers: list[pulsar.Consumer], seconds: float) -> int:
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in consumers:  # drain what each has buffered, so an idle one costs only 5 ms a turn
            try:
                while True:
                    c.acknowledge(c.receive(5))
                    n += 1
            except pulsar.Timeout:
                pass
    return n


def test_key_shared_subscription_dispatch_rate_counts_messages(http: httpx.Client, standalone) -> None:  # noqa: ANN001
    base = f"{V2}/persistent/{NS}/drate-ks"
    topic = f"persistent://{NS}/drate-ks"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/ks", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    rate = {**RATE, "dispatchThrottlingRateInMsg": 20}
    assert http.post(f"{base}/subscriptionDispatchRate", json=rate).status_code == 204
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    try:
        p = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=10,
            batching_max_publish_delay_ms=1000,
            batching_type=pulsar.BatchingType.KeyBased,
        )
        for i in range(200):
            p.send_async(f"m{i}".encode(), None, partition_key=f"k{i % 4}")
        p.flush()
        consumers = [
            client.subscribe(
                topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, receiver_queue_size=1000
            )
            for _ in range(2)
        ]
        got = _received_in(consumers, WINDOW_S)
        print(
            f"Key_Shared dispatch rate: limited to 20 msg/s -> {got / WINDOW_S:.1f} msg/s (batches of <= 10)"
        )
        # at most three one-second periods of 20 messages, plus one batch of overshoot
        assert 20 <= got <= 20 * 3 + 10, got
        assert http.delete(f"{base}/subscriptionDispatchRate").status_code == 204
        assert got + _received_in(consumers, 3.0) == 200  # lifted live: the rest arrives at once
        for c in consumers:
            c.close()
        p.close()
    finally:
        client.close()


def test_read_compacted_subscription_dispatch_rate(http: httpx.Client, standalone) -> None:  # noqa: ANN001
    base = f"{V2}/persistent/{NS}/drate-compacted"
    topic = f"persistent://{NS}/drate-compacted"
    assert http.put(base).status_code == 204
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    try:
        p = client.create_producer(topic, batching_enabled=False)
        for i in range(100):
            p.send_async(f"v{i}".encode(), None, partition_key=f"key-{i}")
        p.flush()
        assert http.put(f"{base}/compaction").status_code == 204
        deadline = time.monotonic() + 30
        while http.get(f"{base}/compaction").json()["status"] != "SUCCESS":
            assert time.monotonic() < deadline, "compaction did not finish"
            time.sleep(0.2)
        assert (
            http.post(f"{base}/dispatchRate", json={**RATE, "dispatchThrottlingRateInMsg": 20}).status_code
            == 204
        )
        consumer = client.subscribe(
            topic,
            "rc",
            is_read_compacted=True,
            initial_position=pulsar.InitialPosition.Earliest,
            receiver_queue_size=1000,
        )
        got = _received_in([consumer], WINDOW_S)
        print(f"read_compacted dispatch rate: limited to 20 msg/s -> {got / WINDOW_S:.1f} msg/s")
        assert 20 <= got <= 20 * 3 + 1, got
        # Not asserted: that the rest arrives once the limit is lifted.  A read_compacted consumer
        # that reads in small steps (a small receiver queue does the same, without any rate
        # limit) misses some of the compacted entries -- an open bug of the compacted view.
        assert http.delete(f"{base}/dispatchRate").status_code == 204
        consumer.close()
        p.close()
    finally:
        client.close()
