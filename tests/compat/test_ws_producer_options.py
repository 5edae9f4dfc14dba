"""The WebSocket producer's query parameters against a real standalone: batching, compression,
routing, hashing scheme and pending limit, each checked with the official client on the other side."""

from __future__ import annotations

import base64
import json
import time

import httpx
import pulsar
import pytest
from websockets.sync.client import connect

from magnetar.common.key_hash import java_string_hash, murmur3_hash

TIMEOUT_S = 10


def ws_url(standalone, topic: str, **params: object) -> str:
    path = topic.replace("://", "/")
    query = "&".join(f"{k}={v}" for k, v in params.items())
    base = standalone.web_url.replace("http://", "ws://")
    return f"{base}/ws/v2/producer/{path}" + (f"?{query}" if query else "")


def publish(ws, payload: bytes, **fields: object) -> None:
    ws.send(json.dumps({"payload": base64.b64encode(payload).decode(), **fields}))


def recv(ws) -> dict:
    return json.loads(ws.recv(timeout=TIMEOUT_S))


def mid(ack: dict) -> pulsar.MessageId:
    return pulsar.MessageId.deserialize(base64.b64decode(ack["messageId"]))


def internal_stats(standalone, topic: str) -> dict:
    path = topic.replace("://", "/")
    r = httpx.get(f"{standalone.web_url}/admin/v2/{path}/internalStats", timeout=TIMEOUT_S)
    r.raise_for_status()
    return r.json()


@pytest.mark.parametrize("compression", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_batched_and_compressed_entries_are_read_by_the_official_client(
    standalone, client, topic, compression
) -> None:
    consumer = client.subscribe(topic, "official")
    url = ws_url(
        standalone,
        topic,
        batchingEnabled="true",
        batchingMaxMessages=5,
        batchingMaxPublishDelay=5000,
        compressionType=compression,
    )
    with connect(url) as ws:
        for i in range(10):
            publish(ws, f"m{i}".encode() * 50, properties={"i": str(i)}, key=f"k{i}", context=str(i))
        acks = [recv(ws) for _ in range(10)]
    assert [a["result"] for a in acks] == ["ok"] * 10, acks
    assert [a["context"] for a in acks] == [str(i) for i in range(10)]
    ids = [mid(a) for a in acks]
    # Two full batches of five: two entries, batch indexes 0..4 in each.
    assert [m.batch_index() for m in ids] == [0, 1, 2, 3, 4] * 2
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) == 2
    assert internal_stats(standalone, topic)["numberOfEntries"] == 2
    for i in range(10):
        msg = consumer.receive(timeout_millis=TIMEOUT_S * 1000)
        assert msg.data() == f"m{i}".encode() * 50
        assert msg.properties() == {"i": str(i)}
        assert msg.partition_key() == f"k{i}"
        assert msg.message_id().serialize() == base64.b64decode(acks[i]["messageId"])
        consumer.acknowledge(msg)
    consumer.close()


def test_an_open_batch_is_stored_after_the_publish_delay(standalone, client, topic) -> None:
    consumer = client.subscribe(topic, "official")
    url = ws_url(standalone, topic, batchingEnabled="true", batchingMaxPublishDelay=100)
    with connect(url) as ws:
        t0 = time.monotonic()
        for i in range(3):
            publish(ws, f"d{i}".encode())
        acks = [recv(ws) for _ in range(3)]
        elapsed = time.monotonic() - t0
    assert [a["result"] for a in acks] == ["ok"] * 3
    assert elapsed >= 0.09, "the batch waited batchingMaxPublishDelay"
    assert len({(mid(a).ledger_id(), mid(a).entry_id()) for a in acks}) == 1
    got = [consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() for _ in range(3)]
    assert got == [b"d0", b"d1", b"d2"]
    consumer.close()


def test_compression_without_batching_stores_the_compressed_payload(standalone, client, topic) -> None:
    consumer = client.subscribe(topic, "official")
    payload = b"z" * 100_000
    with connect(ws_url(standalone, topic, compressionType="ZLIB")) as ws:
        publish(ws, payload)
        assert recv(ws)["result"] == "ok"
    assert consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() == payload
    # The entry on disk is the compressed one.
    assert internal_stats(standalone, topic)["currentLedgerSize"] < 5_000
    consumer.close()


def test_max_pending_messages_answers_an_error_at_once(standalone, topic) -> None:
    url = ws_url(standalone, topic, batchingEnabled="true", batchingMaxPublishDelay=300, maxPendingMessages=2)
    with connect(url) as ws:
        for i in range(3):
            publish(ws, b"x", context=str(i))
        acks = [recv(ws) for _ in range(3)]  # in send order, as every ack
    # The third found two messages pending (in the open batch) and was refused, not queued.
    assert [a["result"] for a in acks] == ["ok", "ok", "send-error:8"]
    assert acks[2]["context"] == "2" and "queue is full" in acks[2]["errorMsg"]
    assert mid(acks[0]).batch_index() == 0 and mid(acks[1]).batch_index() == 1


def _partitioned(standalone, topic: str, n: int) -> None:
    path = topic.replace("://", "/")
    r = httpx.put(f"{standalone.web_url}/admin/v2/{path}/partitions", json=n, timeout=TIMEOUT_S)
    r.raise_for_status()


def test_hashing_scheme_routes_keys_as_the_java_client(standalone, client, topic) -> None:
    """The official Python client only has BoostHash; the Java client's JavaStringHash (its
    default) and Murmur3_32Hash are String.hashCode and MurmurHash3 masked to 31 bits."""
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    _partitioned(standalone, topic, 4)
    keys = [f"key-{i}" for i in range(16)]
    routed = {}
    for scheme, fn in (("JavaStringHash", java_string_hash), ("Murmur3_32Hash", murmur3_hash)):
        with connect(ws_url(standalone, topic, hashingScheme=scheme)) as ws:
            for k in keys:
                publish(ws, k.encode(), key=k)
            routed[scheme] = [mid(recv(ws)).partition() for _ in keys]
        assert routed[scheme] == [fn(k) % 4 for k in keys], scheme
    assert routed["JavaStringHash"] != routed["Murmur3_32Hash"]
    with connect(ws_url(standalone, topic)) as ws:  # the default is JavaStringHash, as Java's
        for k in keys:
            publish(ws, k.encode(), key=k)
        assert [mid(recv(ws)).partition() for _ in keys] == routed["JavaStringHash"]
    # The official client finds each keyed message on the partition the ack named.
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(len(keys) * 3):
        msg = consumer.receive(timeout_millis=TIMEOUT_S * 1000)
        assert msg.partition_key() == msg.data().decode()
        assert msg.topic_name().endswith(f"-partition-{java_string_hash(msg.partition_key()) % 4}") or (
            msg.topic_name().endswith(f"-partition-{murmur3_hash(msg.partition_key()) % 4}")
        )
    consumer.close()


def test_routing_modes_for_keyless_messages(standalone, topic) -> None:
    _partitioned(standalone, topic, 4)
    with connect(ws_url(standalone, topic, messageRoutingMode="SinglePartition")) as ws:
        for _ in range(8):
            publish(ws, b"s")
        single = {mid(recv(ws)).partition() for _ in range(8)}
    assert len(single) == 1
    with connect(ws_url(standalone, topic, messageRoutingMode="RoundRobinPartition")) as ws:
        for _ in range(8):
            publish(ws, b"r")
        parts = [mid(recv(ws)).partition() for _ in range(8)]
    assert sorted(parts) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(parts[i + 1] == (parts[i] + 1) % 4 for i in range(7))


def test_bad_producer_parameters_are_refused_with_400(standalone, topic) -> None:
    from websockets.exceptions import InvalidStatus

    for params in ({"compressionType": "BROTLI"}, {"hashingScheme": "Nope"}, {"batchingMaxMessages": 0}):
        with pytest.raises(InvalidStatus) as err:
            connect(ws_url(standalone, topic, **params))
        assert err.value.response.status_code == 400
