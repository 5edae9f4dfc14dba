"""Subscription types: Exclusive, Shared and Failover as the official client sees them."""

from __future__ import annotations

import time

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


def _drain(consumer, timeout_ms: int = 1500) -> list:
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            return out
        out.append(msg)
        consumer.acknowledge(msg)


def test_exclusive_refuses_a_second_consumer(client, topic):
    first = client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.PulsarException) as info:
        client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    assert isinstance(info.value, pulsar.ConsumerBusy)
    first.close()
    # once the first one is gone the subscription is free again
    again = client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    again.close()


def test_other_subscription_on_same_topic_is_independent(client, topic):
    a = client.subscribe(topic, "a", consumer_type=pulsar.ConsumerType.Exclusive)
    b = client.subscribe(topic, "b", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(topic)
    producer.send(b"both")
    assert a.receive(timeout_millis=10_000).data() == b"both"
    assert b.receive(timeout_millis=10_000).data() == b"both"
    for c in (a, b, producer):
        c.close()


def test_shared_consumers_split_the_stream(client, topic):
    c1 = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
    c2 = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [f"m{i}".encode() for i in range(100)]
    for p in sent:
        producer.send_async(p, None)
    producer.flush()
    got1 = [m.data() for m in _drain(c1)]
    got2 = [m.data() for m in _drain(c2)]
    assert sorted(got1 + got2) == sorted(sent)
    assert not set(got1) & set(got2)
    assert got1 and got2, "both shared consumers must get a share"
    for c in (c1, c2, producer):
        c.close()


def test_shared_redelivers_to_the_remaining_consumer_when_one_closes(client, topic):
    c1 = client.subscribe(topic, "sh2", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=5)
    c2 = client.subscribe(topic, "sh2", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=5)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode())
    got2 = [m.data() for m in _drain(c2, 1000)]
    c1.close()  # whatever c1 held unacked must go to c2
    got2 += [m.data() for m in _drain(c2, 2000)]
    assert sorted(set(got2)) == sorted(f"m{i}".encode() for i in range(20))
    c2.close()
    producer.close()


def test_failover_takeover_when_active_closes(client, topic):
    kwargs = dict(consumer_type=pulsar.ConsumerType.Failover, receiver_queue_size=10)
    a = client.subscribe(topic, "fo", consumer_name="a", **kwargs)
    b = client.subscribe(topic, "fo", consumer_name="b", **kwargs)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"first-{i}".encode())
    got_a = _drain(a, 1500)
    got_b = _drain(b, 300)
    # exactly one of them is active and gets everything, in order
    active, standby = (a, b) if got_a else (b, a)
    got = got_a or got_b
    assert [m.data() for m in got] == [f"first-{i}".encode() for i in range(10)]
    assert not (got_a and got_b)
    active.close()
    time.sleep(0.2)
    for i in range(10):
        producer.send(f"second-{i}".encode())
    taken = []
    for _ in range(10):  # the standby takes over (after the broker's failover delay)
        msg = standby.receive(timeout_millis=10_000)
        standby.acknowledge(msg)
        taken.append(msg)
    assert [m.data() for m in taken] == [f"second-{i}".encode() for i in range(10)]
    assert _drain(standby, 300) == []
    standby.close()
    producer.close()


def test_unsubscribe_removes_the_backlog(client, topic):
    c = client.subscribe(topic, "gone")
    producer = client.create_producer(topic)
    producer.send(b"x")
    c.unsubscribe()
    producer.send(b"y")
    # a new subscription with the same name starts fresh (Latest): x and y are not replayed
    c = client.subscribe(topic, "gone")
    producer.send(b"z")
    assert c.receive(timeout_millis=10_000).data() == b"z"
    c.close()
    producer.close()
