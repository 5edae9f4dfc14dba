"""A steady numbered stream through the official client, for failure tests on real processes.

Theory of operation: :class:`NumberedStream` runs two threads on one official
``pulsar.Client``: a producer sending ``0, 1, 2, ...`` one at a time (each send
waits for its receipt; a value counts as *acknowledged* only once its receipt
came) and a Shared consumer acknowledging everything it receives.  A test
breaks something mid-stream (kill -9 a broker, pause it, unload a bundle, take
ZooKeeper away), waits for more acknowledged sends (:meth:`wait_acked`, bounded),
then :meth:`stop` drains until every acknowledged value arrived (bounded).  The
verdicts: :meth:`lost` (acknowledged yet never received), :meth:`stored_twice`
(one value under two message ids: a duplicate in the log, not a redelivery), and
``redelivered`` (values received again after the consumer acknowledged them,
with when).  :meth:`explain` makes a failure message.  The client's
``send_timeout_millis`` is 60 s and its operation timeout 30 s, so a failover
within them is waited out rather than reported as an error.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable


class NumberedStream:
    """A producer sending numbered messages one at a time, and a consumer acknowledging each."""

    def __init__(self, url: str, topic: str, *, operation_timeout_s: int = 30) -> None:
        import pulsar

        self.client = pulsar.Client(
            url,
            operation_timeout_seconds=operation_timeout_s,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.consumer = self.client.subscribe(topic, "stream", consumer_type=pulsar.ConsumerType.Shared)
        self.producer = self.client.create_producer(
            topic,
            producer_name=f"ms-{uuid.uuid4().hex[:6]}",
            send_timeout_millis=60_000,
            batching_enabled=False,
        )
        self.acked: list[int] = []
        self.receipts: dict[int, str] = {}  # value -> the message id its send receipt carried
        self.received: list[int] = []
        self.stored: dict[int, set[str]] = {}  # value -> the message ids it arrived with
        self.acked_at: dict[int, float] = {}  # value -> when the consumer acknowledged it
        self.redelivered: list[tuple[int, float]] = []  # (value, when its ack was made)
        self.errors: list[str] = []
        self.debug: object = None  # what stop(on_loss=...) gathered
        self._stop = threading.Event()  # the sender stops (after its send in flight)
        self._sender_done = threading.Event()  # the receiver drains from then on
        self._deadline = float("inf")
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._send, self._recv)]
        for t in self._threads:
            t.start()

    def _send(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                msg_id = self.producer.send(str(i).encode())
                self.receipts[i] = str(msg_id)  # (-1,-1): answered as a duplicate by dedup
                self.acked.append(i)
            except Exception as e:  # noqa: BLE001 -- recorded; not acknowledged, so not owed
                self.errors.append(repr(e))
            i += 1
            time.sleep(0.005)

    def _recv(self) -> None:
        # until every acknowledged value arrived (a count could be met early by a value whose
        # send failed on the client yet was stored)
        while not self._sender_done.is_set() or not set(self.acked) <= set(self.received):
            try:
                msg = self.consumer.receive(timeout_millis=500)
            except Exception:  # noqa: BLE001 -- receive timeout
                if self._sender_done.is_set() and time.monotonic() > self._deadline:
                    return
                continue
            v = int(msg.data())
            if v in self.acked_at:
                self.redelivered.append((v, self.acked_at[v]))
            self.received.append(v)
            self.stored.setdefault(v, set()).add(str(msg.message_id()))
            self.consumer.acknowledge(msg)
            self.acked_at.setdefault(v, time.monotonic())

    def wait_acked(self, n: int, timeout_s: float = 60.0) -> None:
        deadline, start = time.monotonic() + timeout_s, len(self.acked)
        while len(self.acked) < start + n:
            assert time.monotonic() < deadline, f"stuck at {len(self.acked)} acked; errors {self.errors[-3:]}"
            time.sleep(0.05)

    def stop(self, drain_s: float = 60.0, on_loss: Callable[[], object] | None = None) -> None:
        """Stops the sender, waits for its send in flight (its receipt may still add a value to
        ``acked``), then lets the receiver drain until every acknowledged value arrived or
        ``drain_s`` passed.  (Draining from the moment of the stop raced with that last receipt:
        the receiver could finish just before the sender appended one more value.)  When some
        value was lost, ``on_loss()`` runs while the consumer is still connected and its answer
        goes into :meth:`explain`."""
        self._stop.set()
        sender, receiver = self._threads
        sender.join(drain_s + 5)
        self._deadline = time.monotonic() + drain_s
        self._sender_done.set()
        receiver.join(drain_s + 5)
        if on_loss is not None and self.lost():
            try:
                self.debug = on_loss()
            except Exception as e:  # noqa: BLE001 -- diagnostics only
                self.debug = repr(e)
        self.client.close()

    def lost(self) -> list[int]:
        return sorted(set(self.acked) - set(self.received))[:10]

    def explain(self) -> str:
        """For a failure message: what arrived around the first lost value, and the send errors."""
        lost = self.lost()
        if not lost:
            return ""
        near = {v: sorted(self.stored.get(v, ())) for v in range(max(0, lost[0] - 3), lost[0] + 4)}
        receipts = {v: self.receipts.get(v) for v in range(max(0, lost[0] - 3), lost[0] + 4)}
        return (
            f"lost {lost}; around it (value -> message ids received) {near}; "
            f"(value -> send receipt) {receipts}; send errors {self.errors[:5]}; at the loss: {self.debug}"
        )

    def receipts_not_consumed(self) -> list[tuple[int, str, list[str]]]:
        """Acknowledged values whose send receipt names a message id they were never consumed
        under (a receipt for an entry that is not in the log); a dedup (-1,-1) receipt aside."""
        out = []
        for v in self.acked:
            r = self.receipts.get(v)
            if r is None or r.startswith("(-1,-1"):
                continue
            ids = sorted(self.stored.get(v, ()))
            if r not in ids:
                out.append((v, r, ids))
        return out

    def stored_twice(self) -> list[int]:
        """Values stored under two message ids: a duplicate in the log (dedup failed)."""
        return sorted(v for v, ids in self.stored.items() if len(ids) > 1)
