"""Produce and consume with the official client: batching on/off, every compression type."""

from __future__ import annotations

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat

COMPRESSIONS = ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_roundtrip(client, topic, batching, compression):
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_publish_delay_ms=5,
        compression_type=getattr(pulsar.CompressionType, compression),
    )
    payloads = [f"msg-{i}-".encode() + b"x" * (i * 37 % 300) for i in range(50)]
    if batching:
        futures = []
        for i, p in enumerate(payloads):
            producer.send_async(
                p, lambda res, mid, f=futures, i=i: f.append((i, res)), properties={"i": str(i)}
            )
        producer.flush()
        assert sorted(i for i, _ in futures) == list(range(50))
        assert all(res == pulsar.Result.Ok for _, res in futures)
    else:
        for i, p in enumerate(payloads):
            mid = producer.send(p, properties={"i": str(i)}, partition_key=f"k{i % 3}")
            assert mid.ledger_id() >= 0 and mid.entry_id() >= 0
    received = []
    for _ in payloads:
        msg = consumer.receive(timeout_millis=10_000)
        received.append(msg)
        consumer.acknowledge(msg)
    assert [m.data() for m in received] == payloads
    assert [m.properties()["i"] for m in received] == [str(i) for i in range(50)]
    if not batching:
        assert [m.partition_key() for m in received] == [f"k{i % 3}" for i in range(50)]
        ids = [(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received]
        assert ids == sorted(ids) and len(set(ids)) == 50
    else:
        # several messages share an entry; batch indexes count up inside it
        entries = {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received}
        assert len(entries) < 50
    producer.close()
    consumer.close()


def test_send_returns_distinct_ids_and_publish_time(client, topic):
    producer = client.create_producer(topic, batching_enabled=False, producer_name="named-producer")
    assert producer.producer_name() == "named-producer"
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    ids = [producer.send(b"a", event_timestamp=1234), producer.send(b"b")]
    assert ids[0] != ids[1]
    m = consumer.receive(timeout_millis=10_000)
    assert m.data() == b"a" and m.event_timestamp() == 1234 and m.publish_timestamp() > 0
    assert m.message_id() == ids[0]
    assert m.topic_name() == topic
    consumer.close()
    producer.close()


def test_generated_producer_names_are_unique(client, topic):
    p1 = client.create_producer(topic)
    p2 = client.create_producer(topic)
    assert p1.producer_name() and p2.producer_name() and p1.producer_name() != p2.producer_name()
    p1.close()
    p2.close()


def test_latest_subscription_skips_old_messages(client, topic):
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    consumer = client.subscribe(topic, "late")  # default initial position: Latest
    producer.send(b"after")
    assert consumer.receive(timeout_millis=10_000).data() == b"after"
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    consumer.close()
    producer.close()


def test_large_message_within_limit(client, topic):
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "big")
    body = bytes(range(256)) * 4096 * 4  # 4 MiB
    producer.send(body)
    assert consumer.receive(timeout_millis=10_000).data() == body
    consumer.close()
    producer.close()


def test_unknown_namespace_is_an_error_not_a_timeout(client):
    with pytest.raises(pulsar.PulsarException) as info:
        client.create_producer("persistent://public/no-such-namespace/t", send_timeout_millis=2000)
    assert not isinstance(info.value, pulsar.Timeout), "the broker must answer with an error, not stay silent"


def test_duplicate_producer_name_is_refused(client, topic):
    first = client.create_producer(topic, producer_name="only-one")
    with pytest.raises(pulsar.PulsarException) as info:
        client.create_producer(topic, producer_name="only-one")
    assert isinstance(info.value, pulsar.ProducerBusy)
    first.close()
    client.create_producer(topic, producer_name="only-one").close()  # free again once closed


def test_message_over_max_size_is_refused_by_the_client(client, topic):
    # CONNECTED told the client maxMessageSize (5 MiB by default); without chunking it refuses
    producer = client.create_producer(topic, batching_enabled=False)
    with pytest.raises(pulsar.PulsarException) as info:
        producer.send(b"x" * (5 * 1024 * 1024 + 1))
    assert isinstance(info.value, pulsar.MessageTooBig)
    producer.send(b"still fine")
    producer.close()
