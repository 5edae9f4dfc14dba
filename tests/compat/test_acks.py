"""Acknowledgements, negative acks, ack timeout and dead-letter topics."""

from __future__ import annotations

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


def _send(client, topic, n, batching=False):
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=5)
    for i in range(n):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    producer.close()


def _receive_all(consumer, timeout_ms=1500):
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            return out


def test_individual_acks_survive_reconnect(client, topic):
    consumer = client.subscribe(topic, "ind", consumer_type=pulsar.ConsumerType.Shared)
    _send(client, topic, 10)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(10)]
    for m in msgs[::2]:  # ack the even ones
        consumer.acknowledge(m)
    consumer.close()  # flushes pending acks; unacked ones are redelivered to the next consumer
    consumer = client.subscribe(topic, "ind", consumer_type=pulsar.ConsumerType.Shared)
    again = sorted(m.data() for m in _receive_all(consumer))
    assert again == sorted(f"m{i}".encode() for i in range(1, 10, 2))
    consumer.close()


def test_cumulative_ack(client, topic):
    consumer = client.subscribe(topic, "cum", consumer_type=pulsar.ConsumerType.Exclusive)
    _send(client, topic, 10)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(10)]
    consumer.acknowledge_cumulative(msgs[6])
    consumer.close()
    consumer = client.subscribe(topic, "cum", consumer_type=pulsar.ConsumerType.Exclusive)
    assert [m.data() for m in _receive_all(consumer)] == [b"m7", b"m8", b"m9"]
    consumer.close()


def test_cumulative_ack_of_batched_messages(client, topic):
    consumer = client.subscribe(topic, "cumb", consumer_type=pulsar.ConsumerType.Exclusive)
    _send(client, topic, 30, batching=True)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(30)]
    consumer.acknowledge_cumulative(msgs[-1])
    consumer.close()
    consumer = client.subscribe(topic, "cumb", consumer_type=pulsar.ConsumerType.Exclusive)
    assert _receive_all(consumer, 800) == []
    consumer.close()


def test_negative_ack_redelivers_with_counts(client, topic):
    consumer = client.subscribe(
        topic, "nack", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
    )
    _send(client, topic, 3)
    first = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
    assert all(m.redelivery_count() == 0 for m in first)
    consumer.negative_acknowledge(first[1])
    for m in (first[0], first[2]):
        consumer.acknowledge(m)
    again = consumer.receive(timeout_millis=10_000)
    assert again.data() == b"m1" and again.redelivery_count() == 1
    consumer.negative_acknowledge(again)
    third = consumer.receive(timeout_millis=10_000)
    assert third.data() == b"m1" and third.redelivery_count() == 2
    consumer.acknowledge(third)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)
    consumer.close()


def test_negative_ack_on_exclusive_rewinds(client, topic):
    consumer = client.subscribe(
        topic, "nackx", consumer_type=pulsar.ConsumerType.Exclusive, negative_ack_redelivery_delay_ms=100
    )
    _send(client, topic, 3)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
    consumer.acknowledge(msgs[0])
    consumer.negative_acknowledge(msgs[1])
    consumer.acknowledge(msgs[2])
    again = consumer.receive(timeout_millis=10_000)
    assert again.data() == b"m1" and again.redelivery_count() >= 1
    consumer.close()


def test_ack_timeout_redelivers(client, topic):
    # the C++ client refuses ack timeouts below 10 s
    consumer = client.subscribe(
        topic, "ackto", consumer_type=pulsar.ConsumerType.Shared, unacked_messages_timeout_ms=10_000
    )
    _send(client, topic, 1)
    m = consumer.receive(timeout_millis=10_000)
    assert m.redelivery_count() == 0
    again = consumer.receive(timeout_millis=20_000)  # not acked -> redelivered after the timeout
    assert again.data() == b"m0" and again.redelivery_count() == 1
    consumer.acknowledge(again)
    consumer.close()


def test_dead_letter_topic(client, topic):
    dlq = topic + "-DLQ"
    dlq_consumer = client.subscribe(dlq, "dlq-reader", initial_position=pulsar.InitialPosition.Earliest)
    consumer = client.subscribe(
        topic,
        "dl",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
            max_redeliver_count=2, dead_letter_topic=dlq, initial_subscription_name="dlq-init"
        ),
    )
    _send(client, topic, 1)
    counts = []
    for _ in range(3):
        m = consumer.receive(timeout_millis=10_000)
        counts.append(m.redelivery_count())
        consumer.negative_acknowledge(m)
    assert counts == [0, 1, 2]
    dead = dlq_consumer.receive(timeout_millis=10_000)
    assert dead.data() == b"m0"
    dlq_consumer.acknowledge(dead)
    with pytest.raises(pulsar.Timeout):  # the original subscription no longer sees it
        consumer.receive(timeout_millis=1000)
    consumer.close()
    dlq_consumer.close()
