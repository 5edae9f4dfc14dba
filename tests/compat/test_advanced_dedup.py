"""Message deduplication with the official client: producer reconnect and broker kill -9."""

from __future__ import annotations

import uuid

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def dedup_broker(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("dedup")
    conf = base / "standalone.conf"
    conf.write_text("brokerDeduplicationEnabled=true\n")
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    proc.terminate()


def _client(url):
    return pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
    )


def _keep(client, topic) -> None:
    """A durable subscription holding the backlog (without one, acked-by-all ledgers are trimmed)."""
    client.subscribe(topic, "keep", initial_position=pulsar.InitialPosition.Earliest).close()


def _read_all(client, topic) -> list[bytes]:
    consumer = client.subscribe(topic, "keep", initial_position=pulsar.InitialPosition.Earliest)
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=2000)
        except pulsar.Timeout:
            break
        out.append(msg.data())
        consumer.acknowledge(msg)
    consumer.close()
    return out


def test_dedup_across_producer_reconnect_and_broker_kill(dedup_broker):
    topic = f"persistent://public/default/dedup-{uuid.uuid4().hex[:8]}"
    client = _client(dedup_broker.broker_url)
    _keep(client, topic)
    p = client.create_producer(topic, producer_name="dp", batching_enabled=False)
    assert p.last_sequence_id() == -1
    for seq in range(10):
        p.send(f"m{seq}".encode(), sequence_id=seq)
    p.close()

    p = client.create_producer(topic, producer_name="dp", batching_enabled=False)
    assert p.last_sequence_id() == 9, "PRODUCER_SUCCESS.last_sequence_id must be the highest persisted"
    dup_ids = [p.send(f"m{seq}".encode(), sequence_id=seq) for seq in range(5, 10)]
    for mid in dup_ids:  # Java answers a duplicate with message id (-1, -1)
        assert (mid.ledger_id(), mid.entry_id()) == (-1, -1)
    for seq in range(10, 15):
        p.send(f"m{seq}".encode(), sequence_id=seq)
    p.close()
    client.close()

    dedup_broker.kill()  # kill -9: nothing snapshotted since the start; replay rebuilds the map
    dedup_broker.restart()
    client = _client(dedup_broker.broker_url)
    p = client.create_producer(topic, producer_name="dp", batching_enabled=False)
    assert p.last_sequence_id() == 14
    for seq in range(12, 17):
        p.send(f"m{seq}".encode(), sequence_id=seq)
    p.close()
    got = _read_all(client, topic)
    client.close()
    assert got == [f"m{i}".encode() for i in range(17)], "exactly one copy of each message"


def test_dedup_of_batches_and_snapshot_on_clean_restart(dedup_broker):
    topic = f"persistent://public/default/dedupb-{uuid.uuid4().hex[:8]}"
    client = _client(dedup_broker.broker_url)
    _keep(client, topic)
    p = client.create_producer(topic, producer_name="bp", batching_enabled=True, batching_max_messages=5)
    for seq in range(20):
        p.send_async(f"b{seq}".encode(), None, sequence_id=seq)
    p.flush()
    p.close()
    client.close()
    assert dedup_broker.terminate() == 0  # clean close writes the snapshot
    dedup_broker.restart()
    client = _client(dedup_broker.broker_url)
    p = client.create_producer(topic, producer_name="bp", batching_enabled=False)
    assert p.last_sequence_id() == 19
    p.send(b"b3-again", sequence_id=3)
    p.send(b"b20", sequence_id=20)
    p.close()
    got = _read_all(client, topic)
    client.close()
    assert got == [f"b{i}".encode() for i in range(21)]


def test_dedup_shows_in_topic_stats_without_a_phantom_subscription(dedup_broker):
    import json
    import urllib.request

    topic = f"persistent://public/default/dedups-{uuid.uuid4().hex[:8]}"
    client = _client(dedup_broker.broker_url)
    p = client.create_producer(topic, producer_name="sp")
    p.send(b"x")
    url = f"{dedup_broker.web_url}/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/stats"
    with urllib.request.urlopen(url, timeout=10) as r:
        stats = json.loads(r.read())
    client.close()
    assert stats["deduplicationStatus"] == "Enabled"
    assert "pulsar.dedup" not in stats["subscriptions"]


def test_namespace_policy_turns_dedup_on_and_off(standalone):
    """The broker default is off; POST /admin/v2/namespaces/{t}/{ns}/deduplication turns it on."""
    import json
    import urllib.request

    ns = f"public/dd{uuid.uuid4().hex[:6]}"

    def call(method: str, path: str, body: object | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{standalone.web_url}/admin/v2/{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10):
            pass

    call("PUT", f"namespaces/{ns}", {})
    topic = f"persistent://{ns}/t"
    client = _client(standalone.broker_url)
    _keep(client, topic)
    p = client.create_producer(topic, producer_name="np", batching_enabled=False)
    p.send(b"a", sequence_id=1)  # not 0: the Python wrapper treats 0 as "not set"
    p.close()
    p = client.create_producer(topic, producer_name="np", batching_enabled=False)
    assert p.last_sequence_id() == -1, "dedup is off by default"
    p.close()
    call("POST", f"namespaces/{ns}/deduplication", True)
    p = client.create_producer(topic, producer_name="np", batching_enabled=False)
    assert p.last_sequence_id() == 1, "turned on: the stored sequence ids were replayed"
    dup = p.send(b"a-again", sequence_id=1)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    p.send(b"b", sequence_id=2)
    p.close()
    call("POST", f"namespaces/{ns}/deduplication", False)
    p = client.create_producer(topic, producer_name="np", batching_enabled=False)
    assert p.last_sequence_id() == -1
    p.close()
    assert _read_all(client, topic) == [b"a", b"b"]
    client.close()
