"""Delayed delivery with the official client: not early, not much late, overflow rescans, restart."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat

TICK_MS = 1000
LATE_SLACK_MS = TICK_MS + 1500  # one tick, plus dispatch and client-queue latency on a busy machine


@pytest.fixture(scope="module")
def delayed_broker(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("delayed")
    conf = base / "standalone.conf"
    # A tiny index cap so the overflow (skip, then rescan storage) path runs in these tests.
    conf.write_text(
        f"delayedDeliveryTickTimeMillis={TICK_MS}\nmagnetarDelayedDeliveryMaxIndexedMessages=10\n"
    )
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    proc.terminate()


def _client(url):
    return pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
    )


def _topic() -> str:
    return f"persistent://public/default/delayed-{uuid.uuid4().hex[:8]}"


def _collect(consumer, n: int, timeout_s: float) -> list[tuple[bytes, int, int]]:
    """(payload, receive time ms, deliver-at ms) for up to n messages."""
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            continue
        now = int(time.time() * 1000)
        out.append((msg.data(), now, int(msg.properties().get("at", "0"))))
        consumer.acknowledge(msg)
    return out


@pytest.mark.parametrize("sub_type", ["Shared", "KeyShared"])
def test_delayed_not_early_not_much_late_with_overflow(delayed_broker, sub_type):
    client = _client(delayed_broker.broker_url)
    topic = _topic()
    consumer = client.subscribe(topic, "d", consumer_type=getattr(pulsar.ConsumerType, sub_type))
    producer = client.create_producer(topic, batching_enabled=False)
    n_delayed = 40  # 4x the index cap: most are skipped first and found by a storage rescan
    for i in range(n_delayed):
        delay_ms = 1500 + (i % 4) * 500
        at = int(time.time() * 1000) + delay_ms  # the client stamps deliver_at a moment later
        producer.send(
            f"d{i}".encode(),
            deliver_after=timedelta(milliseconds=delay_ms),
            properties={"at": str(at)},
            partition_key=f"k{i % 5}",
        )
    for i in range(3):
        producer.send(f"now{i}".encode(), properties={"at": "0"})
    got = _collect(consumer, n_delayed + 3, timeout_s=20)
    payloads = [p for p, _, _ in got]
    assert sorted(payloads) == sorted(
        [f"d{i}".encode() for i in range(n_delayed)] + [b"now0", b"now1", b"now2"]
    )
    assert payloads[:3] == [b"now0", b"now1", b"now2"], "undelayed messages are not held behind delayed ones"
    for payload, recv_ms, at_ms in got:
        if at_ms:
            assert recv_ms >= at_ms, f"{payload!r} delivered {at_ms - recv_ms} ms early"
            assert recv_ms <= at_ms + LATE_SLACK_MS, f"{payload!r} delivered {recv_ms - at_ms} ms late"
    for c in (consumer, producer):
        c.close()
    client.close()


def test_exclusive_delivers_delayed_messages_immediately(delayed_broker):
    client = _client(delayed_broker.broker_url)
    topic = _topic()
    consumer = client.subscribe(topic, "x", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"late", deliver_after=timedelta(seconds=30))
    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"late"
    client.close()


def test_delayed_messages_survive_a_broker_kill(delayed_broker):
    client = _client(delayed_broker.broker_url)
    topic = _topic()
    consumer = client.subscribe(topic, "d", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    sent_at = int(time.time() * 1000)
    for i in range(15):
        producer.send(f"r{i}".encode(), deliver_after=timedelta(seconds=4))
    producer.close()
    consumer.close()
    client.close()
    delayed_broker.kill()
    delayed_broker.restart()
    client = _client(delayed_broker.broker_url)
    consumer = client.subscribe(topic, "d", consumer_type=pulsar.ConsumerType.Shared)
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 15 and time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            continue
        got.append((msg.data(), int(time.time() * 1000)))
        consumer.acknowledge(msg)
    assert sorted(p for p, _ in got) == sorted(f"r{i}".encode() for i in range(15))
    assert min(t for _, t in got) >= sent_at + 4000, "delivered before its deadline after the restart"
    client.close()
