"""Producer access modes as Pulsar answers them, with the official client.

A second Exclusive producer is refused with ProducerFenced; an ExclusiveWithFencing
producer fences the one attached: its later sends fail promptly (ProducerFenced or
AlreadyClosed, never the send timeout) and its reconnects are refused for good.
"""

from __future__ import annotations

import time

import pulsar
import pytest

MODE = pulsar.ProducerAccessMode


def test_second_exclusive_producer_is_fenced(client, topic) -> None:
    first = client.create_producer(topic, access_mode=MODE.Exclusive)
    t0 = time.monotonic()
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=MODE.Exclusive)
    assert time.monotonic() - t0 < 5  # final answer, not retried until the operation timeout
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, access_mode=MODE.Shared)  # Pulsar: ProducerBusy for Shared
    first.send(b"still mine")
    first.close()


def test_exclusive_with_fencing_fences_the_old_producer(client, topic) -> None:
    old = client.create_producer(
        topic, access_mode=MODE.Exclusive, batching_enabled=False, send_timeout_millis=30000
    )
    old.send(b"before")
    fencer = client.create_producer(topic, access_mode=MODE.ExclusiveWithFencing, batching_enabled=False)
    fencer.send(b"from-fencer")
    t0 = time.monotonic()
    with pytest.raises((pulsar.ProducerFenced, pulsar.AlreadyClosed)):
        old.send(b"fenced-1")
    with pytest.raises((pulsar.ProducerFenced, pulsar.AlreadyClosed)):
        old.send(b"fenced-2")
    assert time.monotonic() - t0 < 10, "the fenced producer's sends must fail promptly, not time out"
    fencer.send(b"after")
    fencer.close()
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    got = []
    while True:
        try:
            m = consumer.receive(timeout_millis=1500)
        except pulsar.Timeout:
            break
        got.append(m.data())
        consumer.acknowledge(m)
    assert got == [b"before", b"from-fencer", b"after"]
    consumer.close()


def test_fenced_producer_pending_sends_fail_promptly(client, topic) -> None:
    """Sends queued (async) while the producer is fenced complete with an error, not a timeout."""
    old = client.create_producer(topic, access_mode=MODE.Exclusive, batching_enabled=False)
    old.send(b"first")
    fencer = client.create_producer(topic, access_mode=MODE.ExclusiveWithFencing)
    results: list[object] = []
    t0 = time.monotonic()
    for i in range(5):
        old.send_async(b"pending-%d" % i, lambda res, _mid: results.append(res))
    deadline = time.monotonic() + 15
    while len(results) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(results) == 5, f"only {len(results)} callbacks after {time.monotonic() - t0:.1f}s"
    assert time.monotonic() - t0 < 10
    assert all(r != pulsar.Result.Ok for r in results), results
    fencer.close()
