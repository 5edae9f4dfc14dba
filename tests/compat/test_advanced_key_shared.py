"""Key_Shared with the official client: per-key order under consumer churn, STICKY ranges."""

from __future__ import annotations

import random
import threading
import time

import pytest

pulsar = pytest.importorskip("pulsar")

pytestmark = pytest.mark.compat

KEYS = 20
PER_KEY = 60


class OrderChecker:
    """Fails on any message of a key arriving after a later one of the same key (gaps included)."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.duplicates = 0
        self.errors: list[str] = []

    def see(self, who: str, key: str, seq: int) -> None:
        last = self.last.get(key, -1)
        if seq <= last:
            self.duplicates += 1  # a redelivery of something already seen: allowed, not reordered
        elif seq != last + 1:
            self.errors.append(f"{who}: key {key} got {seq} after {last}")
        else:
            self.last[key] = seq


def _ks(client, topic, name, **kw):
    return client.subscribe(
        topic,
        "ks",
        consumer_type=pulsar.ConsumerType.KeyShared,
        consumer_name=name,
        receiver_queue_size=kw.pop("receiver_queue_size", 10),
        initial_position=pulsar.InitialPosition.Earliest,
        **kw,
    )


def test_key_shared_order_per_key_under_join_and_leave(client, topic):
    rng = random.Random(7)
    consumers = {f"c{i}": _ks(client, topic, f"c{i}") for i in range(3)}
    producer = client.create_producer(topic, batching_enabled=False)
    total = KEYS * PER_KEY

    def produce() -> None:
        order = [(k, s) for s in range(PER_KEY) for k in range(KEYS)]
        for i, (k, s) in enumerate(order):
            producer.send_async(f"{s}".encode(), None, partition_key=f"key-{k}")
            if i % 100 == 99:
                producer.flush()
                time.sleep(0.05)
        producer.flush()

    t = threading.Thread(target=produce)
    t.start()
    checker = OrderChecker()
    received = 0
    next_name = 3
    churns = 0
    deadline = time.monotonic() + 90
    done = lambda: all(checker.last.get(f"key-{k}", -1) == PER_KEY - 1 for k in range(KEYS))  # noqa: E731
    while not done() and not checker.errors and time.monotonic() < deadline:
        names = sorted(consumers)
        rng.shuffle(names)  # serve consumers in random order, so a new owner can race an old one
        for name in names:
            c = consumers[name]
            try:
                msg = c.receive(timeout_millis=20)
            except pulsar.Timeout:
                continue
            checker.see(name, msg.partition_key(), int(msg.data()))
            c.acknowledge(msg)
            received += 1
            if received % 97 == 0:
                churns += 1
                if len(consumers) > 1 and rng.random() < 0.5:
                    victim = rng.choice(sorted(consumers))
                    consumers.pop(victim).close()
                else:
                    consumers[f"c{next_name}"] = _ks(client, topic, f"c{next_name}")
                    next_name += 1
            break  # re-list consumers after each message (churn may have changed them)
    t.join(timeout=30)
    for c in consumers.values():
        c.close()
    producer.close()
    assert not checker.errors, checker.errors[:10]
    assert done(), (
        f"not every key completed: {sorted(checker.last.items())[:5]} ... received {received}/{total}"
    )
    assert churns >= 5


def test_key_shared_same_key_same_consumer_and_sticky_overlap_refused(client, topic):
    a = _ks(client, topic, "a", receiver_queue_size=100)
    b = _ks(client, topic, "b", receiver_queue_size=100)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(200):
        producer.send(f"{i}".encode(), partition_key=f"k{i % 10}")
    seen: dict[str, set[str]] = {}
    for name, c in (("a", a), ("b", b)):
        while True:
            try:
                m = c.receive(timeout_millis=1000)
            except pulsar.Timeout:
                break
            seen.setdefault(m.partition_key(), set()).add(name)
            c.acknowledge(m)
    assert len(seen) == 10
    assert all(len(v) == 1 for v in seen.values()), seen
    assert {n for v in seen.values() for n in v} == {"a", "b"}
    for c in (a, b, producer):
        c.close()

    sticky_topic = topic + "-sticky"
    policy = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)])
    s1 = client.subscribe(
        sticky_topic, "st", consumer_type=pulsar.ConsumerType.KeyShared, key_shared_policy=policy
    )
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(
            sticky_topic,
            "st",
            consumer_type=pulsar.ConsumerType.KeyShared,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                pulsar.KeySharedMode.Sticky, sticky_ranges=[(30000, 40000)]
            ),
        )
    s2 = client.subscribe(
        sticky_topic,
        "st",
        consumer_type=pulsar.ConsumerType.KeyShared,
        key_shared_policy=pulsar.ConsumerKeySharedPolicy(
            pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)]
        ),
    )
    p = client.create_producer(sticky_topic, batching_enabled=False)
    for i in range(50):
        p.send(b"x", partition_key=f"s{i}")
    got = 0
    for c in (s1, s2):
        while True:
            try:
                c.acknowledge(c.receive(timeout_millis=1000))
                got += 1
            except pulsar.Timeout:
                break
    assert got == 50
    for c in (s1, s2, p):
        c.close()
