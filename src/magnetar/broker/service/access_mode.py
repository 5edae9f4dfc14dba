"""Producer access modes (PIP-68): Shared, Exclusive, ExclusiveWithFencing, WaitForExclusive.

Theory of operation: the topic admits a new producer according to its mode and
the producers already attached:

* Shared -- refused with ProducerBusy while an exclusive producer is attached;
* Exclusive -- refused with ProducerBusy if an exclusive producer is attached,
  with ProducerFenced if shared producers are (Java's answers; cpp retries
  neither);
* ExclusiveWithFencing -- the producers attached are closed (CLOSE_PRODUCER) and
  the newcomer takes over;
* WaitForExclusive -- if anyone is attached the producer is *queued*: the broker
  answers PRODUCER_SUCCESS with ``producer_ready=false`` at once and a second
  PRODUCER_SUCCESS (same request id, ready) when the topic has no producer
  left.  The queue is bounded; closing the connection or the producer leaves it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from magnetar.broker import errors

if TYPE_CHECKING:
    from magnetar.broker.service.producer import Producer
    from magnetar.broker.service.topic import PersistentTopic

SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = 0, 1, 2, 3
MAX_WAITING_PRODUCERS = 1000


class ProducerAccess:
    def __init__(self, topic: PersistentTopic) -> None:
        self.topic = topic
        self.waiting: deque[tuple[Producer, int]] = deque()

    def _exclusive(self) -> Producer | None:
        for p in self.topic.producers.values():
            if p.access_mode != SHARED:
                return p
        return None

    def admit(self, producer: Producer, request_id: int) -> bool:
        """True: attach now.  False: queued (WaitForExclusive).  Raises when refused."""
        mode = producer.access_mode
        attached = list(self.topic.producers.values())
        exclusive = self._exclusive()
        if mode == SHARED:
            if exclusive is not None:
                raise errors.ProducerBusyError(
                    f"Topic has an existing exclusive producer: {exclusive.producer_name}"
                )
            return True
        if mode == EXCLUSIVE:
            if exclusive is not None:
                raise errors.ProducerBusyError(
                    f"Topic has an existing exclusive producer: {exclusive.producer_name}"
                )
            if attached:
                raise errors.ProducerFencedError("Topic has existing shared producers")
            return True
        if mode == EXCLUSIVE_WITH_FENCING:
            for p in attached:
                p.cnx.broker_closed_producer(p)
                self.topic.remove_producer(p)
            return True
        if mode == WAIT_FOR_EXCLUSIVE:
            if not attached and not self.waiting:
                return True
            if len(self.waiting) >= MAX_WAITING_PRODUCERS:
                raise errors.ProducerBusyError("Too many producers waiting for exclusive access")
            self.waiting.append((producer, request_id))
            return False
        raise errors.NotAllowedError(f"Unknown producer access mode {mode}")

    def forget(self, producer: Producer) -> None:
        self.waiting = deque((p, r) for p, r in self.waiting if p is not producer)

    def next_ready(self) -> tuple[Producer, int] | None:
        """When the topic has no producer left: the first waiting producer still connected."""
        if self.topic.producers:
            return None
        while self.waiting:
            producer, request_id = self.waiting.popleft()
            if not producer.cnx.closed and producer.cnx.producers.get(producer.producer_id) is producer:
                return producer, request_id
        return None
