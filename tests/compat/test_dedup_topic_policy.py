"""Topic-level ``deduplicationEnabled`` with the official client: it wins over the namespace and broker.

Pulsar's precedence is topic policy > namespace policy > ``brokerDeduplicationEnabled``.
A producer resends sequence ids it already sent; only a topic with deduplication on
drops the repeats.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


@pytest.fixture
def plain_broker(standalone):
    """The compat suite's standalone (default configuration: brokerDeduplicationEnabled=false);
    each test uses its own topics and namespace."""
    return standalone


def _send_with_repeats(client, topic: str) -> list[bytes]:
    """Seq 0..4, then 2..6 again from a new producer of the same name; what the topic stored."""
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    p = client.create_producer(topic, producer_name="rp", batching_enabled=False)
    for seq in range(5):
        p.send(f"m{seq}".encode(), sequence_id=seq)
    p.close()
    p = client.create_producer(topic, producer_name="rp", batching_enabled=False)
    for seq in range(2, 7):
        p.send(f"m{seq}".encode(), sequence_id=seq)
    p.close()
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=1500)
        except pulsar.Timeout:
            break
        out.append(msg.data())
        consumer.acknowledge(msg)
    consumer.close()
    return out


def _set_topic_dedup(web_url: str, topic: str, value: bool) -> None:
    path = topic.replace("persistent://", "persistent/")
    r = httpx.post(f"{web_url}/admin/v2/{path}/deduplicationEnabled", json=value, timeout=60)
    assert r.status_code in (200, 204), r.text
    got = httpx.get(f"{web_url}/admin/v2/{path}/deduplicationEnabled", timeout=60)
    assert got.json() is value


def test_topic_level_dedup_only_on_its_topic(plain_broker):
    u = uuid.uuid4().hex[:8]
    on, off = f"persistent://public/default/td-on-{u}", f"persistent://public/default/td-off-{u}"
    client = pulsar.Client(plain_broker.broker_url, operation_timeout_seconds=10)
    try:
        client.create_producer(on).close()  # the topic exists (and is loaded) before the policy
        _set_topic_dedup(plain_broker.web_url, on, True)
        deduped = _send_with_repeats(client, on)
        plain = _send_with_repeats(client, off)
    finally:
        client.close()
    assert deduped == [f"m{i}".encode() for i in range(7)]
    assert plain == [f"m{i}".encode() for i in [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]]


def test_topic_level_false_overrides_namespace_true(plain_broker):
    u = uuid.uuid4().hex[:8]
    ns = f"public/tdns-{u}"
    web = plain_broker.web_url
    assert httpx.put(f"{web}/admin/v2/namespaces/{ns}", json={}, timeout=60).status_code in (200, 204)
    r = httpx.post(f"{web}/admin/v2/namespaces/{ns}/deduplication", json=True, timeout=60)
    assert r.status_code in (200, 204), r.text
    excluded, covered = f"persistent://{ns}/excluded", f"persistent://{ns}/covered"
    client = pulsar.Client(plain_broker.broker_url, operation_timeout_seconds=10)
    try:
        client.create_producer(excluded).close()
        _set_topic_dedup(web, excluded, False)
        kept = _send_with_repeats(client, excluded)
        deduped = _send_with_repeats(client, covered)
    finally:
        client.close()
    assert len(kept) == 10
    assert deduped == [f"m{i}".encode() for i in range(7)]
