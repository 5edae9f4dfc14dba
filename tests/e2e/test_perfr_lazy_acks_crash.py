"""Acks persisted lazily (managedLedgerDefaultMarkDeleteRateLimit) across kill -9 and clean stops.

The broker runs with a 10 s mark-delete interval so acks stay unpersisted for the test's
duration.  With the official client against a real ``magnetar standalone``:

* kill -9 after acks that were applied but not yet persisted (the subscription's first
  mark-delete is written at once and starts the 10 s interval): the restarted broker
  redelivers them (everything after the last persisted mark-delete, without a gap)
  together with the never-acknowledged messages -- redelivery, never loss;
* SIGTERM with the consumer still connected: shutdown writes the latest mark-delete, so
  nothing acknowledged comes back; a consumer that closes (CLOSE_CONSUMER) has its acks
  written before the close is answered, so nothing comes back after a kill -9 either.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from magnetar.testing.standalone import StandaloneProcess

pulsar = pytest.importorskip("pulsar")

TOPIC = "persistent://public/default/perfr-lazy-acks"
SUB = "lazy"
DEADLINE_S = 30.0
START_S = 90.0  # a loaded 2-core machine can take tens of seconds to start a standalone


def _client(url: str):  # noqa: ANN202
    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def _backlog(sa: StandaloneProcess) -> int | None:
    try:
        with urllib.request.urlopen(
            f"{sa.web_url}/admin/v2/persistent/public/default/perfr-lazy-acks/stats", timeout=5
        ) as r:
            return json.load(r)["subscriptions"][SUB]["msgBacklog"]
    except (OSError, KeyError, ValueError):
        return None


def _wait_backlog(sa: StandaloneProcess, n: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if _backlog(sa) == n:
            return
        time.sleep(0.1)
    raise AssertionError(f"backlog never reached {n} (now {_backlog(sa)}); log:\n{sa.log_tail()}")


def _send(client, first: int, n: int) -> None:  # noqa: ANN001
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(first, first + n):
        producer.send(b"%06d" % i)
    producer.close()


def _receive_all(consumer, quiet_ms: int = 2000) -> list[int]:  # noqa: ANN001
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=quiet_ms)
        except pulsar.Timeout:
            return out
        out.append(int(msg.data()))


def _receive_n(consumer, n: int) -> list:  # noqa: ANN001
    return [consumer.receive(timeout_millis=int(DEADLINE_S * 1000)) for _ in range(n)]


@pytest.fixture
def standalone(tmp_path):  # noqa: ANN201
    conf = tmp_path / "standalone.conf"
    conf.write_text("managedLedgerDefaultMarkDeleteRateLimit=0.1\n")
    sa = StandaloneProcess(tmp_path / "data", config_file=conf)
    sa.start(timeout_s=START_S)
    yield sa
    sa.kill()


def test_kill9_after_unpersisted_acks_redelivers_them(standalone):
    sa = standalone
    client = _client(sa.broker_url)
    consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared)
    _send(client, 0, 40)
    msgs = _receive_n(consumer, 40)
    # The first mark-delete after the subscription is written at once (a rate limiter's first
    # permit is free, as in Pulsar); it starts the 10 s interval. Acks applied after it stay
    # unpersisted until the kill. (Acking all 30 at once made the test depend on the client's
    # 100 ms ack grouping: one group on a quiet machine, written at once in full.)
    for m in msgs[:5]:
        consumer.acknowledge(m)
    _wait_backlog(sa, 35)
    for m in msgs[5:30]:
        consumer.acknowledge(m)
    _wait_backlog(sa, 10)  # the broker applied them (in memory)
    sa.kill()
    client.close()
    sa.restart(timeout_s=START_S)
    client = _client(sa.broker_url)
    consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared)
    again = sorted(_receive_all(consumer))
    client.close()
    assert again, "the unpersisted acks should have been lost in the crash (redelivery)"
    assert again == list(range(again[0], 40)), f"a gap: something was lost ({again})"
    assert again[0] < 30, "no acknowledged message came back: were the acks persisted eagerly?"


def test_clean_stop_and_consumer_close_persist_the_last_acks(standalone):
    sa = standalone
    client = _client(sa.broker_url)
    consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared)
    _send(client, 0, 20)
    msgs = _receive_n(consumer, 20)
    consumer.acknowledge(msgs[0])
    _wait_backlog(sa, 19)
    for m in msgs[1:]:
        consumer.acknowledge(m)
    _wait_backlog(sa, 0)
    assert sa.terminate() == 0  # the consumer is still connected: shutdown writes the cursor
    client.close()
    sa.restart(timeout_s=START_S)
    client = _client(sa.broker_url)
    consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared)
    assert _receive_all(consumer) == [], "SIGTERM lost acks: acknowledged messages came back"
    _send(client, 20, 20)
    msgs = _receive_n(consumer, 20)
    for m in msgs:
        consumer.acknowledge(m)
    _wait_backlog(sa, 0)
    consumer.close()  # CLOSE_CONSUMER: its acks are written before the answer
    sa.kill()
    client.close()
    sa.restart(timeout_s=START_S)
    client = _client(sa.broker_url)
    consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared)
    assert _receive_all(consumer) == [], "a closed consumer's acks were lost in the crash"
    client.close()
