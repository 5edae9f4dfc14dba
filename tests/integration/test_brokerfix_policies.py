# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Policies that are accepted are applied: non-persistent topics, backlog-quota time limits,
maxTopicsPerNamespace, bookieAffinityGroup -- with the official client against a real standalone.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pulsar
import pytest

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"


@pytest.fixture(scope="module")
def client(standalone):  # type: ignore[no-untyped-def]
    c = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    yield c
    c.close()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topic_policies_apply_to_a_non_persistent_topic(standalone, http: httpx.Client, client) -> None:
    name = _name("np-pol")
    topic = f"non-persistent://public/default/{name}"
    consumer = client.subscribe(topic, "s")
    p1 = client.create_producer(topic)
    r = http.post(f"{V2}/non-persistent/public/default/{name}/maxProducers", json=1)
    assert r.status_code == 204, r.text
    time.sleep(1.0)  # a few policy passes (magnetarPolicyCheckIntervalMs=200)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)  # maxProducers=1 applies to the non-persistent topic
    p1.send(b"np")
    assert consumer.receive(timeout_millis=5000).data() == b"np"
    log = standalone.log_path.read_text(errors="replace")
    assert f"applying policies to {topic} failed" not in log
    assert "set_config" not in log
    p1.close()
    consumer.close()
