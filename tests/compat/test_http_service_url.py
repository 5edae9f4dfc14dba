"""``http://`` service URLs: the client looks up over HTTP, then speaks the binary protocol."""

from __future__ import annotations

import json
import urllib.request

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


def test_http_lookup_json(standalone):
    url = f"{standalone.web_url}/lookup/v2/topic/persistent/public/default/http-lookup"
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.loads(resp.read())
    assert body["brokerUrl"] == standalone.broker_url
    assert "brokerUrlTls" in body
    assert body["httpUrl"] == standalone.web_url


def test_http_lookup_unknown_namespace_is_404(standalone):
    url = f"{standalone.web_url}/lookup/v2/topic/persistent/public/nope/t"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url, timeout=10)
    assert info.value.code == 404
    assert "reason" in json.loads(info.value.read())


def test_health(standalone):
    with urllib.request.urlopen(f"{standalone.web_url}/admin/v2/brokers/health", timeout=15) as resp:
        assert resp.status == 200 and resp.read() == b"ok"


def test_produce_consume_over_http_service_url(http_client, topic):
    consumer = http_client.subscribe(topic, "http-sub")
    producer = http_client.create_producer(topic)
    for i in range(5):
        producer.send(f"h{i}".encode())
    assert [consumer.receive(timeout_millis=10_000).data() for _ in range(5)] == [
        f"h{i}".encode() for i in range(5)
    ]
    producer.close()
    consumer.close()


def test_partitioned_over_http_service_url(http_client, standalone):
    import uuid

    local = f"hpt-{uuid.uuid4().hex[:8]}"
    req = urllib.request.Request(
        f"{standalone.web_url}/admin/v2/persistent/public/default/{local}/partitions", data=b"2", method="PUT"
    )
    req.add_header("Content-Type", "application/json")
    urllib.request.urlopen(req, timeout=10).close()
    topic = f"persistent://public/default/{local}"
    consumer = http_client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = http_client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"p{i}".encode())
    got = sorted(consumer.receive(timeout_millis=10_000).data() for _ in range(10))
    assert got == sorted(f"p{i}".encode() for i in range(10))
    producer.close()
    consumer.close()
