"""The official client's TableView (``client.create_table_view``) over a compacted topic.

pulsar-client 3.13 has ``create_table_view``: a read_compacted reader from the
earliest message that folds messages into a key -> latest value map (an empty
payload deletes the key).  Here: the map after compaction equals the map of
the raw history; live updates and deletes after the horizon reach a listener;
a typed (StringSchema) view decodes values.
"""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

pulsar = pytest.importorskip("pulsar")
from pulsar.schema import StringSchema  # noqa: E402

pytestmark = pytest.mark.compat
WAIT_S = 30


@pytest.fixture
def http(standalone):
    with httpx.Client(base_url=standalone.web_url, timeout=15) as c:
        yield c


_LISTENERS: list = []  # see test_table_view_over_compacted_topic_and_live_updates


def compact(http: httpx.Client, topic: str) -> None:
    path = "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/compaction"
    assert http.put(path).status_code == 204
    deadline = time.monotonic() + WAIT_S
    while http.get(path).json()["status"] != "SUCCESS":
        assert time.monotonic() < deadline, http.get(path).json()
        time.sleep(0.05)


def wait_until(pred, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_table_view_over_compacted_topic_and_live_updates(client, http) -> None:
    topic = f"persistent://public/default/tv-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(
        topic, schema=StringSchema(), batching_enabled=True, block_if_queue_full=True
    )
    expected: dict[str, str] = {}
    for i in range(1000):
        key = f"key-{i % 20}"
        expected[key] = f"value-{i}"
        producer.send_async(expected[key], None, partition_key=key)
    for key in ("key-0", "key-1"):
        producer.send_async("", None, partition_key=key)
        del expected[key]
    producer.flush()
    compact(http, topic)

    tv = client.create_table_view(topic, schema=StringSchema())
    wait_until(lambda: len(tv) == len(expected), f"table view size {len(tv)} != {len(expected)}")
    seen: dict[str, str] = {}
    tv.for_each(lambda k, v: seen.__setitem__(k, v))
    assert seen == expected
    assert tv.get("key-5") == expected["key-5"] and tv.get("key-0") is None

    updates: list[tuple[str, str]] = []
    lock = threading.Lock()

    def listener(k: str, v: str) -> None:
        with lock:
            updates.append((k, v))

    tv.for_each_and_listen(listener)
    # The C++ client keeps the listener in its table view until the *client* closes (the
    # fixture's teardown) and drops it there on one of its own threads, without the GIL: if
    # that drop freed the closure, the interpreter crashed (one segfault in Client.close in a
    # full run). Keep it alive past the client's close.
    _LISTENERS.append(listener)
    producer.send("fresh", partition_key="key-5")
    producer.send("new-key", partition_key="key-new")
    producer.send("", partition_key="key-6")
    wait_until(lambda: tv.get("key-new") == "new-key", "live update not seen")
    wait_until(lambda: tv.get("key-6") is None, "live delete not seen")
    assert tv.get("key-5") == "fresh"
    with lock:
        assert ("key-5", "fresh") in updates and ("key-new", "new-key") in updates
    tv.close()
    producer.close()


def test_has_message_available_ends_at_compacted_tail(client, http) -> None:
    """The topic's last batch lost messages in compaction (its deletes are dropped): a
    read_compacted reader must still learn that it has read everything (GET_LAST_MESSAGE_ID
    answers the compacted ledger's last entry, as Pulsar does), or a TableView never starts."""
    topic = f"persistent://public/default/tv-tail-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
    for i in range(50):
        producer.send_async(f"v{i}".encode(), None, partition_key=f"k{i % 5}")
    for key in ("k0", "k1"):
        producer.send_async(b"", None, partition_key=key)
    producer.flush()
    producer.close()
    compact(http, topic)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        msg = reader.read_next(10_000)
        got.append((msg.partition_key(), msg.data()))
    reader.close()
    assert sorted(got) == [("k2", b"v47"), ("k3", b"v48"), ("k4", b"v49")]


def test_partitioned_topic_compaction_and_table_view(client, http) -> None:
    """PUT compaction on a partitioned topic compacts every partition; a TableView over the
    partitioned topic folds all of them."""
    local = f"tv-part-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{local}"
    path = f"/admin/v2/persistent/public/default/{local}"
    assert http.put(path + "/partitions", json=3).status_code == 204
    producer = client.create_producer(topic, batching_enabled=False)
    expected = {}
    for i in range(300):
        key = f"key-{i % 30}"
        expected[key] = f"value-{i}".encode()
        producer.send(expected[key], partition_key=key)
    producer.close()
    assert http.get(path + "/compaction").json()["status"] == "NOT_RUN"
    assert http.put(path + "/compaction").status_code == 204
    deadline = time.monotonic() + WAIT_S
    while http.get(path + "/compaction").json()["status"] != "SUCCESS":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for i in range(3):
        r = http.get(f"{path}-partition-{i}/compaction")
        assert r.json()["status"] == "SUCCESS", r.text
    tv = client.create_table_view(topic)
    wait_until(lambda: len(tv) == len(expected), f"table view size {len(tv)}")
    seen: dict[str, bytes] = {}
    tv.for_each(lambda k, v: seen.__setitem__(k, v))
    tv.close()
    assert seen == expected
    consumer = client.subscribe(
        topic, "compacted", is_read_compacted=True, initial_position=pulsar.InitialPosition.Earliest
    )
    got = {}
    for _ in range(len(expected)):
        msg = consumer.receive(10_000)
        got[msg.partition_key()] = msg.data()
        consumer.acknowledge(msg)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    consumer.close()
    assert got == expected
