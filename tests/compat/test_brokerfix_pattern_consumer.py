"""A regex consumer of the official client sees a topic created after it subscribed within
a few seconds (``pattern_auto_discovery_period=1``), with the broker advertising
``supports_topic_watchers`` and without it.

pulsar-client 3.13's Python ``subscribe()`` type-checks ``pattern_auto_discovery_period``
but never hands it to the C++ configuration (the consumer polls every 60 s whatever it is
given), so the consumer is made through the client's own ``_pulsar`` binding, with the
period set.  The C++ client polls GET_TOPICS_OF_NAMESPACE; it does not use watchers.
"""

from __future__ import annotations

import re
import time
import uuid

import _pulsar
import pulsar
import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason
from tests.compat.conftest import make_client


@pytest.fixture(scope="module", params=["watchers-on", "watchers-off"])
def broker(request, tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp(f"pattern-{request.param}")
    conf = base / "standalone.conf"
    flag = "true" if request.param == "watchers-on" else "false"
    conf.write_text(f"enableBrokerSideSubscriptionPatternEvaluation={flag}\n")
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


def _pattern_consumer(client: pulsar.Client, pattern: str, sub: str):  # type: ignore[no-untyped-def]
    conf = _pulsar.ConsumerConfiguration()
    conf.pattern_auto_discovery_period(1)
    conf.subscription_initial_position(pulsar.InitialPosition.Earliest)
    conf.consumer_type(pulsar.ConsumerType.Shared)
    conf.schema(pulsar.schema.BytesSchema().schema_info())
    return client._client.subscribe_pattern(pattern, sub, conf)


def _receive_all(consumer, seconds: float) -> list[bytes]:  # type: ignore[no-untyped-def]
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            m = consumer.receive(200)
        except pulsar.Timeout:
            continue
        got.append(m.data())
        consumer.acknowledge(m)
    return got


def test_pattern_consumer_sees_a_topic_created_later(broker) -> None:
    client = make_client(broker.broker_url)
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    try:
        client.create_producer(f"persistent://public/default/{prefix}-first").close()
        consumer = _pattern_consumer(client, f"persistent://public/default/{prefix}-.*", "rx")
        time.sleep(0.5)
        later = client.create_producer(f"persistent://public/default/{prefix}-later", batching_enabled=False)
        unrelated = client.create_producer(
            f"persistent://public/default/other{prefix}", batching_enabled=False
        )
        t0 = time.monotonic()
        later.send(b"late")
        unrelated.send(b"unrelated")
        got: list[bytes] = []
        while b"late" not in got and time.monotonic() - t0 < 15:
            try:
                m = consumer.receive(200)
            except pulsar.Timeout:
                continue
            got.append(m.data())
            consumer.acknowledge(m)
        elapsed = time.monotonic() - t0
        assert b"late" in got, "the regex consumer never subscribed to the topic created after it"
        assert elapsed < 6, f"took {elapsed:.1f}s (period 1 s)"
        assert b"unrelated" not in got + _receive_all(consumer, 1.5)
        consumer.close()
    finally:
        client.close()


def test_pattern_consumer_with_the_python_api(broker) -> None:
    """The plain ``subscribe(re.compile(...))`` path: existing topics are consumed."""
    client = make_client(broker.broker_url)
    prefix = f"py{uuid.uuid4().hex[:6]}"
    try:
        p = client.create_producer(f"persistent://public/default/{prefix}-a")
        p.send(b"one")
        consumer = client.subscribe(
            re.compile(f"persistent://public/default/{prefix}-.*"),
            "py",
            initial_position=pulsar.InitialPosition.Earliest,
        )
        assert consumer.receive(timeout_millis=5000).data() == b"one"
        consumer.close()
    finally:
        client.close()
