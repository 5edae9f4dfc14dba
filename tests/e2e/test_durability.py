"""Durability across kill -9: what was acknowledged survives, what was consumed stays consumed.

The official client sends 100,000 batched messages with ``send_async`` to a real
``magnetar standalone`` process; the process is killed with SIGKILL while sends
are in flight and restarted on the same data directory.  Then:

1. a consumer receives every message whose send the broker acknowledged, in
   send order (messages whose receipt was lost in the crash may appear too --
   they were stored but not confirmed -- but never out of order);
2. the consumer acknowledges the first part, closes (which confirms its acks),
   the process is killed again and restarted, and a new consumer on the same
   subscription starts right after the acknowledged part: nothing it
   acknowledged comes back, and nothing acknowledged by the producer is lost.
"""

from __future__ import annotations

import threading

import pytest

from magnetar.testing.standalone import StandaloneProcess

pulsar = pytest.importorskip("pulsar")

TOTAL = 100_000
KILL_AFTER_ACKED = 40_000
PAYLOAD_PAD = b"." * 90
TOPIC = "persistent://public/default/durability"
SUB = "durable-sub"


def _client(url: str):
    # the C++ console logger (a Python logger called from C++ threads can abort at exit)
    return pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def _seq(msg) -> int:
    return int(msg.data()[:8])


def _produce_until_killed(proc: StandaloneProcess) -> list[int]:
    """Send TOTAL messages asynchronously, kill -9 the broker once KILL_AFTER_ACKED are confirmed."""
    acked: list[int] = []
    lock = threading.Lock()
    reached = threading.Event()

    def on_sent(seq: int):
        def callback(res, _mid) -> None:
            if res == pulsar.Result.Ok:
                with lock:
                    acked.append(seq)
                    if len(acked) >= KILL_AFTER_ACKED:
                        reached.set()

        return callback

    client = _client(proc.broker_url)
    producer = client.create_producer(
        TOPIC,
        batching_enabled=True,
        batching_max_publish_delay_ms=5,
        batching_max_messages=500,
        max_pending_messages=5_000,
        block_if_queue_full=True,
        send_timeout_millis=5_000,
    )

    def sender() -> None:
        for seq in range(TOTAL):
            if proc.proc is None or proc.proc.poll() is not None:
                return  # the broker is gone: stop queueing
            try:
                producer.send_async(b"%08d" % seq + PAYLOAD_PAD, on_sent(seq))
            except pulsar.PulsarException:
                return

    thread = threading.Thread(target=sender, name="durability-sender", daemon=True)
    thread.start()
    assert reached.wait(120), f"only {len(acked)} sends acknowledged; log:\n{proc.log_tail()}"
    proc.kill()
    thread.join(60)
    client.close()
    with lock:
        return list(acked)


def _entry(msg) -> tuple[int, int]:
    mid = msg.message_id()
    return mid.ledger_id(), mid.entry_id()


def _receive_to_entry_boundary(consumer, at_least: int) -> list:
    """Receive at least ``at_least`` messages, ending with the last message of its entry."""
    out = [consumer.receive(timeout_millis=10_000) for _ in range(at_least)]
    while True:
        nxt = consumer.receive(timeout_millis=10_000)
        if _entry(nxt) != _entry(out[-1]):
            return out  # ``nxt`` stays unacknowledged and is redelivered later
        out.append(nxt)


def _receive_all(consumer, limit: int) -> list:
    out = []
    while len(out) < limit:
        try:
            out.append(consumer.receive(timeout_millis=3_000))
        except pulsar.Timeout:
            break
    return out


def test_acknowledged_messages_survive_kill_9(tmp_path):
    proc = StandaloneProcess(tmp_path / "data")
    proc.start()
    try:
        # the subscription exists before the first message, so it will see all of them
        setup = _client(proc.broker_url)
        setup.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Exclusive).close()
        setup.close()

        acked = _produce_until_killed(proc)
        assert acked == sorted(acked), "send receipts must come back in send order"
        assert KILL_AFTER_ACKED <= len(acked) < TOTAL, "the kill must land mid-stream"

        proc.restart()
        client = _client(proc.broker_url)
        consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Exclusive)
        first_part = _receive_to_entry_boundary(consumer, len(acked) // 2)
        seqs = [_seq(m) for m in first_part]
        assert seqs == sorted(seqs), "delivery out of order"
        assert seqs[0] == 0 and len(set(seqs)) == len(seqs)
        # The cut is the last message of a batch entry: a cumulative ack in the middle of a batch
        # acknowledges only the entries before it (the client's rule), so the batch would come back.
        consumer.acknowledge_cumulative(first_part[-1])
        last_consumed = seqs[-1]
        consumer.close()  # flushes the acknowledgement and waits for the broker's answer
        client.close()

        proc.kill()
        proc.restart()
        client = _client(proc.broker_url)
        consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Exclusive)
        rest = [_seq(m) for m in _receive_all(consumer, TOTAL)]
        assert rest, "nothing delivered after the second restart"
        assert rest[0] == last_consumed + 1, (
            f"consumed messages came back (first={rest[0]}, acked up to {last_consumed})"
        )
        assert rest == sorted(rest) and len(set(rest)) == len(rest)
        missing = sorted(set(acked) - set(seqs) - set(rest))
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:10]}"
        consumer.close()
        client.close()
    finally:
        code = proc.terminate()
    assert code == 0, f"standalone exited {code} on SIGTERM:\n{proc.log_tail()}"


def test_sigterm_while_producing_exits_0_and_keeps_acknowledged(tmp_path):
    """A clean stop with clients attached: connections closed, storage flushed, exit 0; the
    restart serves every acknowledged message, in order, to the existing subscription.  (This
    covers what a separate stop-with-no-client-then-restart test proved; SIGTERM with no client
    attached exits 0 in tests/integration/test_standalone_cli.py.)"""
    proc = StandaloneProcess(tmp_path / "data")
    proc.start()
    try:
        setup = _client(proc.broker_url)
        setup.subscribe(TOPIC, SUB).close()
        setup.close()
        acked: list[int] = []
        lock = threading.Lock()
        client = _client(proc.broker_url)
        producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_publish_delay_ms=2)

        def on_sent(seq: int):
            def callback(res, _mid) -> None:
                if res == pulsar.Result.Ok:
                    with lock:
                        acked.append(seq)

            return callback

        for seq in range(5_000):
            producer.send_async(b"%08d" % seq, on_sent(seq))
        producer.flush()
        for seq in range(5_000, 20_000):  # still in flight when the signal lands
            producer.send_async(b"%08d" % seq, on_sent(seq))
        code = proc.terminate()
        assert code == 0, f"SIGTERM with clients attached exited {code}:\n{proc.log_tail()}"
        client.close()
        with lock:
            confirmed = sorted(acked)
        assert len(confirmed) >= 5_000

        proc.restart()
        client = _client(proc.broker_url)
        consumer = client.subscribe(TOPIC, SUB)
        got = [_seq(m) for m in _receive_all(consumer, 20_000)]
        assert got == sorted(got)
        missing = sorted(set(confirmed) - set(got))
        assert not missing, (
            f"{len(missing)} acknowledged messages lost after a clean stop, e.g. {missing[:10]}"
        )
        consumer.close()
        client.close()
    finally:
        code = proc.terminate()
    assert code == 0, proc.log_tail()
