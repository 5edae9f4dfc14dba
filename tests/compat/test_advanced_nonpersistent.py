"""Non-persistent topics with the official client: live delivery only, drops when no permits."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


def _np_topic() -> str:
    return f"non-persistent://public/default/np-{uuid.uuid4().hex[:8]}"


def _drain(consumer, timeout_ms=1000) -> list[bytes]:
    out = []
    while True:
        try:
            m = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            return out
        out.append(m.data())
        consumer.acknowledge(m)


def test_non_persistent_delivers_to_connected_consumers_only(client):
    topic = _np_topic()
    producer = client.create_producer(topic, batching_enabled=False)
    mid = producer.send(b"before-anyone")
    assert (mid.ledger_id(), mid.entry_id()) == (-1, -1), "Java acks non-persistent sends with (-1,-1)"
    a = client.subscribe(topic, "a", consumer_type=pulsar.ConsumerType.Shared)
    b = client.subscribe(topic, "b", consumer_type=pulsar.ConsumerType.Exclusive)
    for i in range(20):
        producer.send(f"m{i}".encode())
    expected = [f"m{i}".encode() for i in range(20)]
    assert _drain(a) == expected
    assert _drain(b) == expected
    a.close()
    producer.send(b"after-a-left")
    again = client.subscribe(topic, "a", consumer_type=pulsar.ConsumerType.Shared)
    assert _drain(again) == [], "nothing is retained for a subscription without consumers"
    assert _drain(b) == [b"after-a-left"]
    for c in (again, b, producer):
        c.close()


def test_non_persistent_drops_without_permits_and_counts_them(client, standalone):
    topic = _np_topic()
    consumer = client.subscribe(topic, "slow", receiver_queue_size=5)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(100):
        producer.send(f"m{i}".encode())
    stats_url = f"{standalone.web_url}/admin/v2/non-persistent/public/default/{topic.rsplit('/', 1)[1]}/stats"
    with urllib.request.urlopen(stats_url, timeout=10) as r:
        stats = json.loads(r.read())
    got = _drain(consumer)
    assert 0 < len(got) < 100, "a consumer with 5 permits cannot have received all 100"
    assert got == sorted(got, key=lambda b: int(b[1:])), "what arrives stays in order"
    sub = stats["subscriptions"]["slow"]
    assert sub["msgDropCount"] == 100 - 5, sub
    consumer.close()
    producer.close()


def test_terminated_topic_refuses_producers_and_consumers_still_read(client, standalone, topic):
    """Terminate (admin REST): producers get TopicTerminated; cpp consumers keep their connection
    (REACHED_END_OF_TOPIC would close it, so it is not sent) and read everything stored."""
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "t", initial_position=pulsar.InitialPosition.Earliest)
    for i in range(5):
        producer.send(f"m{i}".encode())
    url = f"{standalone.web_url}/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/terminate"
    req = urllib.request.Request(url, method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10) as r:
        last = json.loads(r.read())
    assert last["entryId"] == 4
    with pytest.raises(pulsar.PulsarException) as info:
        producer.send(b"too-late")
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    assert _drain(consumer) == [f"m{i}".encode() for i in range(5)]
    assert info.value is not None
    consumer.close()
