"""Topic compaction with the official client against a real standalone subprocess.

The standalone here rolls ledgers every 10 entries with no minimum rollover
time, so the ledgers compaction lets go are trimmed (retention 0) and the
topic's ``storageSize`` visibly shrinks; the compaction monitor runs every
second for the ``compactionThreshold`` test.
"""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.compat

V2 = "/admin/v2"
N_UPDATES, N_KEYS = 10_000, 100
DELETED = [f"k{i}" for i in range(10)]  # their last message is an empty payload
READDED = "k10"  # deleted, then written again
WAIT_S = 60
PROPS = """
managedLedgerMaxEntriesPerLedger=10
managedLedgerMinLedgerRolloverTimeMinutes=0
brokerServiceCompactionMonitorIntervalInSeconds=1
"""


@pytest.fixture(scope="module")
def compaction_standalone(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("compaction")
    conf = base / "standalone.conf"
    conf.write_text(PROPS)
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


@pytest.fixture
def client(compaction_standalone):
    c = pulsar.Client(
        compaction_standalone.broker_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )
    yield c
    c.close()


@pytest.fixture
def http(compaction_standalone):
    with httpx.Client(base_url=compaction_standalone.web_url, timeout=30) as c:
        yield c


def new_topic(prefix: str) -> tuple[str, str]:
    local = f"{prefix}-{uuid.uuid4().hex[:8]}"
    return f"persistent://public/default/{local}", f"{V2}/persistent/public/default/{local}"


def wait_status(http: httpx.Client, path: str, want: str = "SUCCESS") -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        body = http.get(path + "/compaction").json()
        if body["status"] == want or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def produce_updates(client, topic: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """10,000 updates over 100 keys, then deletes; the expected latest map."""
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=100, block_if_queue_full=True
    )
    latest: dict[str, str] = {}
    for i in range(N_UPDATES):
        key = f"k{i % N_KEYS}"
        latest[key] = f"{key}={i}"
        producer.send_async(latest[key].encode(), None, partition_key=key)
    for key in [*DELETED, READDED]:
        producer.send_async(b"", None, partition_key=key)
        latest.pop(key)
    latest[READDED] = f"{READDED}=again"
    producer.send_async(latest[READDED].encode(), None, partition_key=READDED)
    producer.flush()
    producer.close()
    return latest


def read_all(reader) -> list[tuple[str, bytes]]:  # type: ignore[no-untyped-def]
    """Everything the reader has up to the topic's end (GET_LAST_MESSAGE_ID), not an idle
    timeout: a loaded machine may pause longer than any fixed idle time."""
    out = []
    while reader.has_message_available():
        msg = reader.read_next(10_000)
        out.append((msg.partition_key(), msg.data()))
    return out


def storage_size(http: httpx.Client, path: str) -> int:
    r = http.get(path + "/stats")
    assert r.status_code == 200, r.text
    return r.json()["storageSize"]


def hold_for_compaction(client, http: httpx.Client, topic: str, path: str) -> None:  # type: ignore[no-untyped-def]
    """Compact the empty topic once, so its ``__compaction`` cursor exists before any data:
    with retention 0 and no subscription, rolled-over ledgers are otherwise trimmed before
    anyone compacts them (Pulsar's behaviour too; users keep retention or a subscription)."""
    client.create_producer(topic).close()
    assert http.get(path + "/compaction").json() == {"status": "NOT_RUN", "lastError": ""}
    assert http.put(path + "/compaction").status_code == 204
    assert wait_status(http, path) == {"status": "SUCCESS", "lastError": ""}


def test_compaction_latest_value_per_key_then_live(client, http) -> None:
    topic, path = new_topic("compacted")
    hold_for_compaction(client, http, topic, path)
    latest = produce_updates(client, topic)
    size_before = storage_size(http, path)

    # Two triggers at once: one starts it, the other is told it is running.
    statuses: list[int] = []
    barrier = threading.Barrier(2)

    def put() -> None:
        barrier.wait()
        statuses.append(http.put(path + "/compaction").status_code)

    threads = [threading.Thread(target=put) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(statuses) == [204, 409], statuses
    r = http.put(path + "/compaction")
    if r.status_code == 409:
        assert r.json() == {"reason": "Compaction already in progress"}
    assert wait_status(http, path) == {"status": "SUCCESS", "lastError": ""}
    deadline = time.monotonic() + WAIT_S
    while (stats := http.get(path + "/stats").json()["compaction"])["lastCompactionSucceedTimestamp"] == 0:
        assert time.monotonic() < deadline, stats
        time.sleep(0.05)
    assert stats["lastCompactionRemovedEventCount"] > 0  # of the last run (the third PUT may re-run)
    assert stats["lastCompactionFailedTimestamp"] == 0

    live = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        live.send(f"live{i}".encode(), partition_key="k50")
    live.close()

    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = read_all(reader)
    reader.close()
    compacted, tail = got[: len(latest)], got[len(latest) :]
    assert dict((k, v.decode()) for k, v in compacted) == latest
    assert len({k for k, _ in compacted}) == len(compacted)  # exactly one per live key
    assert tail == [("k50", f"live{i}".encode()) for i in range(5)]

    # A TableView over the topic shows the same map (plus the live updates of k50).
    expected = {**latest, "k50": "live4"}
    tv = client.create_table_view(topic)
    deadline = time.monotonic() + WAIT_S
    while len(tv) < len(expected) and time.monotonic() < deadline:
        time.sleep(0.1)
    view = {}
    tv.for_each(lambda k, v: view.__setitem__(k, v.decode()))
    tv.close()
    assert view == expected

    # Storage: the ledgers behind the horizon were trimmed (retention 0).
    deadline = time.monotonic() + WAIT_S
    while storage_size(http, path) >= size_before and time.monotonic() < deadline:
        time.sleep(0.2)
    size_after = storage_size(http, path)
    internal = http.get(path + "/internalStats").json()
    assert size_after < size_before / 2, (size_before, size_after, internal)

    # A fresh non-compacted reader sees only what is left of the topic itself.
    plain = client.create_reader(topic, pulsar.MessageId.earliest)
    left = read_all(plain)
    plain.close()
    assert len(left) < N_UPDATES


def test_read_compacted_durable_consumer(client, http) -> None:
    topic, path = new_topic("compacted-sub")
    hold_for_compaction(client, http, topic, path)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(300):
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 3}")
    producer.close()
    assert http.put(path + "/compaction").status_code == 204
    assert wait_status(http, path)["status"] == "SUCCESS"
    consumer = client.subscribe(
        topic, "compacted-sub", is_read_compacted=True, initial_position=pulsar.InitialPosition.Earliest
    )
    got = []
    for _ in range(3):
        msg = consumer.receive(10_000)
        got.append((msg.partition_key(), msg.data()))
        consumer.acknowledge(msg)
    assert sorted(got) == [("k0", b"v297"), ("k1", b"v298"), ("k2", b"v299")]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1000)
    consumer.close()
    # Shared subscriptions cannot read compacted (Pulsar refuses them too).
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "shared", is_read_compacted=True, consumer_type=pulsar.ConsumerType.Shared)


def test_compaction_threshold_triggers_automatically(client, http) -> None:
    ns = f"public/auto-{uuid.uuid4().hex[:6]}"
    assert http.put(f"{V2}/namespaces/{ns}", json={}).status_code == 204
    r = http.put(f"{V2}/namespaces/{ns}/compactionThreshold", json=2000)
    assert r.status_code == 204, r.text
    topic = f"persistent://{ns}/auto"
    path = f"{V2}/persistent/{ns}/auto"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(200):
        producer.send(f"value-{i:05d}".encode(), partition_key=f"k{i % 4}")
    assert wait_status(http, path)["status"] == "SUCCESS"
    producer.close()
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = read_all(reader)
    reader.close()
    # The monitor may have compacted while the producer was still sending: the view is the
    # compacted prefix then the live rest; folded, it is the latest value per key.
    assert dict(got) == {f"k{j}": f"value-{196 + j:05d}".encode() for j in range(4)}
    assert len(got) < 200  # some superseded values were compacted away


def test_read_compacted_after_every_topic_ledger_was_trimmed(client, http) -> None:
    """Everything compacted, the topic's ledgers behind the horizon trimmed, the current ledger
    empty: GET_LAST_MESSAGE_ID must name the compacted ledger's last message, not "(L, -1)"
    (the official client reads an entry id of -1 as "nothing to read" and
    has_message_available() would say False)."""
    topic, path = new_topic("compacted-trimmed")
    hold_for_compaction(client, http, topic, path)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(40):  # four full ledgers of 10
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 4}")
    producer.close()
    assert http.put(path + "/compaction").status_code == 204
    assert wait_status(http, path)["status"] == "SUCCESS"
    deadline = time.monotonic() + WAIT_S
    while True:
        ledgers = http.get(path + "/internalStats").json()["ledgers"]
        if sum(info["entries"] for info in ledgers) == 0:
            break
        assert time.monotonic() < deadline, ledgers
        time.sleep(0.1)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = read_all(reader)
    reader.close()
    assert got == [(f"k{j}", f"v{36 + j}".encode()) for j in range(4)]


def test_compaction_errors(http) -> None:
    missing = f"{V2}/persistent/public/default/no-such-{uuid.uuid4().hex[:6]}/compaction"
    r = http.put(missing)
    assert r.status_code == 404 and "reason" in r.json()
    assert http.get(missing).status_code == 404
    r = http.put(f"{V2}/persistent/public/nope-ns/t/compaction")
    assert r.status_code == 404
    r = http.put(f"{V2}/non-persistent/public/default/t/compaction")
    assert r.status_code == 405
