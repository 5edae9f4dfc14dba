"""``/metrics`` in Pulsar's names against an in-process standalone: per-namespace aggregation
when ``exposeTopicLevelMetricsInPrometheus=false``, per-consumer series when asked, and the
text exposition parses (prometheus-client's own parser)."""

from __future__ import annotations

import base64
import json

import httpx
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect

from magnetar.testing.standalone import running_standalone


async def _produce_and_consume(sa, topic: str, n: int, scrape: bool = False) -> str:
    """Produce n over WebSocket, receive them without acking; scrape while still attached."""
    ws_base = sa.web_url.replace("http://", "ws://") + "/ws/v2"
    path = topic.replace("://", "/")
    async with (
        connect(f"{ws_base}/consumer/{path}/sub") as consumer,
        connect(f"{ws_base}/producer/{path}") as prod,
    ):
        for i in range(n):
            await prod.send(json.dumps({"payload": base64.b64encode(b"x" * 50).decode(), "context": str(i)}))
        for _ in range(n):
            assert json.loads(await prod.recv())["result"] == "ok"
        for _ in range(n):
            json.loads(await consumer.recv())  # delivered, not acknowledged
        if not scrape:
            return ""
        async with httpx.AsyncClient() as c:
            r = await c.get(sa.web_url + "/metrics")
        assert r.headers["content-type"].startswith("text/plain")
        return r.text


def _samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


async def test_namespace_level_when_topic_level_is_off(tmp_path) -> None:
    props = {"exposeTopicLevelMetricsInPrometheus": "false"}
    async with running_standalone(tmp_path, props) as sa:
        for t in ("ns-a", "ns-b"):
            await _produce_and_consume(sa, f"persistent://public/default/{t}", 5)
        async with httpx.AsyncClient() as c:
            text = (await c.get(sa.web_url + "/metrics")).text
    samples = _samples(text)
    (rate,) = [s for s in samples["pulsar_in_messages_total"] if "namespace" in s.labels]
    assert rate.labels == {"cluster": "standalone", "namespace": "public/default"}
    assert rate.value == 10
    (topics,) = samples["pulsar_topics_count"]
    assert topics.labels["namespace"] == "public/default" and topics.value == 2
    # Entry-size buckets sum per namespace too (10 entries under 512 bytes).
    (sizes,) = samples["pulsar_entry_size_count"]
    assert sizes.value == 10
    assert (
        sum(s.value for s in samples["pulsar_entry_size_le_512"])
        + sum(s.value for s in samples["pulsar_entry_size_le_128"])
        == 10
    )
    assert [s.value for s in samples["pulsar_broker_storage_write_rate"]] == [0.0]  # first scrape
    assert not any("topic" in s.labels for ss in samples.values() for s in ss)
    assert samples["pulsar_storage_write_latency_count"][0].value == 10


async def test_topic_and_consumer_level_series(tmp_path) -> None:
    props = {"exposeConsumerLevelMetricsInPrometheus": "true"}
    topic = "persistent://public/default/per-consumer"
    async with running_standalone(tmp_path, props) as sa:
        samples = _samples(await _produce_and_consume(sa, topic, 4, scrape=True))
    (unacked,) = [s for s in samples["pulsar_consumer_unacked_messages"] if s.labels["topic"] == topic]
    assert unacked.value == 4 and unacked.labels["subscription"] == "sub"
    (backlog,) = [s for s in samples["pulsar_subscription_back_log"] if s.labels["topic"] == topic]
    assert backlog.value == 4
    assert {s.labels["le"] for s in samples["pulsar_broker_publish_latency_bucket"]} >= {
        "0.5",
        "1000",
        "+Inf",
    }
