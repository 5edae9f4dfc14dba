"""Readers (earliest / latest / a message id), seek by id, get_last_message_id."""

from __future__ import annotations

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


def _produce(client, topic, n, batching=False):
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=5)
    ids = []
    for i in range(n):
        ids.append(producer.send(f"m{i}".encode()))
    producer.close()
    return ids


def test_reader_from_earliest_and_has_message_available(client, topic):
    _produce(client, topic, 5)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(timeout_millis=10_000).data())
    assert got == [f"m{i}".encode() for i in range(5)]
    reader.close()


def test_reader_from_latest_sees_only_new(client, topic):
    _produce(client, topic, 3)
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    assert not reader.has_message_available()
    producer = client.create_producer(topic)
    producer.send(b"new")
    assert reader.read_next(timeout_millis=10_000).data() == b"new"
    reader.close()
    producer.close()


def test_reader_from_message_id_exclusive_and_inclusive(client, topic):
    ids = _produce(client, topic, 5)
    reader = client.create_reader(topic, ids[2])
    assert reader.read_next(timeout_millis=10_000).data() == b"m3"
    reader.close()
    reader = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert reader.read_next(timeout_millis=10_000).data() == b"m2"
    reader.close()


def test_reader_from_deserialized_id(client, topic):
    ids = _produce(client, topic, 3)
    mid = pulsar.MessageId.deserialize(ids[0].serialize())
    reader = client.create_reader(topic, mid)
    assert reader.read_next(timeout_millis=10_000).data() == b"m1"
    reader.close()


def test_readers_do_not_leave_durable_subscriptions(client, topic):
    _produce(client, topic, 2)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    reader.read_next(timeout_millis=10_000)
    reader.close()
    # a durable subscription created afterwards at Latest has no backlog
    consumer = client.subscribe(topic, "after-reader")
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    consumer.close()


def test_seek_by_message_id(client, topic):
    consumer = client.subscribe(topic, "seek", initial_position=pulsar.InitialPosition.Earliest)
    ids = _produce(client, topic, 6)
    for _ in range(6):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    consumer.seek(ids[2])
    # after a seek the broker redelivers from the given position (the client skips the id itself
    # only for readers with exclusive start; consumers get it again)
    got = []
    while True:
        try:
            m = consumer.receive(timeout_millis=1500)
        except pulsar.Timeout:
            break
        got.append(m.data())
        consumer.acknowledge(m)
    assert got[-3:] == [b"m3", b"m4", b"m5"]
    assert got[0] in (b"m2", b"m3")
    consumer.close()


def test_seek_to_earliest(client, topic):
    consumer = client.subscribe(topic, "seek0", initial_position=pulsar.InitialPosition.Earliest)
    _produce(client, topic, 3)
    for _ in range(3):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    consumer.seek(pulsar.MessageId.earliest)
    assert [consumer.receive(timeout_millis=10_000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
    consumer.close()


def test_get_last_message_id(client, topic):
    consumer = client.subscribe(topic, "last")
    ids = _produce(client, topic, 4)
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
    consumer.close()
