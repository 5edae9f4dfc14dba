"""Partitioned topics: creation over HTTP, round-robin and key-hash routing."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


def _http(method: str, url: str, body: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _create_partitioned(standalone, n: int) -> tuple[str, str]:
    local = f"pt-{uuid.uuid4().hex[:8]}"
    status, _ = _http(
        "PUT", f"{standalone.web_url}/admin/v2/persistent/public/default/{local}/partitions", str(n).encode()
    )
    assert status == 204
    return f"persistent://public/default/{local}", local


def test_partitions_endpoint_and_conflict(standalone):
    topic, local = _create_partitioned(standalone, 3)
    url = f"{standalone.web_url}/admin/v2/persistent/public/default/{local}/partitions"
    status, body = _http("GET", url)
    assert status == 200 and json.loads(body) == {"partitions": 3}
    status, body = _http("PUT", url, b"3")
    assert status == 409 and "reason" in json.loads(body)
    status, body = _http(
        "GET", f"{standalone.web_url}/admin/v2/persistent/public/default/absent-x/partitions"
    )
    assert status == 200 and json.loads(body) == {"partitions": 0}


def test_client_sees_partitions(client, standalone):
    topic, _ = _create_partitioned(standalone, 4)
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(4)]


def test_round_robin_spreads_over_partitions(client, standalone):
    topic, _ = _create_partitioned(standalone, 3)
    consumer = client.subscribe(topic, "rr", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
    )
    for i in range(30):
        producer.send(f"m{i}".encode())
    got = [consumer.receive(timeout_millis=10_000) for _ in range(30)]
    for m in got:
        consumer.acknowledge(m)
    assert sorted(m.data() for m in got) == sorted(f"m{i}".encode() for i in range(30))
    partitions = {m.topic_name() for m in got}
    assert partitions == {f"{topic}-partition-{i}" for i in range(3)}
    producer.close()
    consumer.close()


def test_key_hash_routing_keeps_a_key_on_one_partition(client, standalone):
    topic, _ = _create_partitioned(standalone, 4)
    consumer = client.subscribe(topic, "kh", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"key-{k}" for k in range(8)]
    for i in range(40):
        producer.send(f"m{i}".encode(), partition_key=keys[i % 8])
    got = [consumer.receive(timeout_millis=10_000) for _ in range(40)]
    by_key: dict[str, set[str]] = {}
    order: dict[str, list[bytes]] = {}
    for m in got:
        by_key.setdefault(m.partition_key(), set()).add(m.topic_name())
        order.setdefault(m.partition_key(), []).append(m.data())
        consumer.acknowledge(m)
    assert all(len(parts) == 1 for parts in by_key.values())
    for k, msgs in order.items():  # per-key order kept
        idx = keys.index(k)
        assert msgs == [f"m{i}".encode() for i in range(idx, 40, 8)]
    producer.close()
    consumer.close()


def test_failover_on_partitions_assigns_each_partition_once(client, standalone):
    topic, _ = _create_partitioned(standalone, 2)
    kwargs = dict(
        consumer_type=pulsar.ConsumerType.Failover, initial_position=pulsar.InitialPosition.Earliest
    )
    a = client.subscribe(topic, "fop", consumer_name="a", **kwargs)
    b = client.subscribe(topic, "fop", consumer_name="b", **kwargs)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode())

    def drain(c):
        out = []
        while True:
            try:
                m = c.receive(timeout_millis=1500)
            except pulsar.Timeout:
                return out
            c.acknowledge(m)
            out.append(m)

    got_a, got_b = drain(a), drain(b)
    assert sorted(m.data() for m in got_a + got_b) == sorted(f"m{i}".encode() for i in range(20))
    assert not {m.topic_name() for m in got_a} & {m.topic_name() for m in got_b}
    for c in (a, b, producer):
        c.close()
