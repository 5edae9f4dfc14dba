"""Producer access modes (PIP-68): Shared, Exclusive, ExclusiveWithFencing, WaitForExclusive.

Theory of operation: the topic admits a new producer according to its mode and
the producers already attached:

* Shared -- refused with ProducerBusy while an exclusive producer is attached
  or waiting;
* Exclusive -- refused with ProducerFenced if any producer is attached
  (Pulsar's answer; the client treats it as final, it does not retry);
* ExclusiveWithFencing -- the producers attached are closed (CLOSE_PRODUCER) and
  the newcomer takes over;
* WaitForExclusive -- if anyone is attached the producer is *queued*: the broker
  answers PRODUCER_SUCCESS with ``producer_ready=false`` at once and a second
  PRODUCER_SUCCESS (same request id, ready) when the topic has no producer
  left.  The queue is bounded; closing the connection or the producer leaves it.

The topic epoch fences the producers an exclusive newcomer displaced: every
exclusive producer that takes the topic afresh moves the epoch on by one and
gets it in PRODUCER_SUCCESS (``topic_epoch``); the client sends it back when it
reconnects, and an epoch older than the topic's is refused with ProducerFenced,
which the client takes as final (its pending sends fail with it).  A reconnect
carrying the current epoch is the same producer coming back and is admitted.
The epoch lives as long as the loaded topic (Pulsar keeps it in the managed
ledger's properties; here an unload forgets it).
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
    __slots__ = ("topic", "waiting", "epoch")  # one per topic

    def __init__(self, topic: PersistentTopic) -> None:
        self.topic = topic
        # Producers waiting for exclusive access; a deque made on the first one (an empty deque
        # holds a ~760-byte block, and almost no topic ever has a waiting producer).
        self.waiting: deque[tuple[Producer, int]] | tuple[()] = ()
        self.epoch: int | None = None  # None until a first exclusive producer takes the topic

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
            if exclusive is not None or self.waiting:
                holder = (
                    exclusive.producer_name if exclusive is not None else self.waiting[0][0].producer_name
                )
                raise errors.ProducerBusyError(f"Topic has an existing exclusive producer: {holder}")
            return True
        if mode == EXCLUSIVE:
            if exclusive is not None:
                raise errors.ProducerFencedError(
                    f"Topic has an existing exclusive producer: {exclusive.producer_name}"
                )
            if attached:
                raise errors.ProducerFencedError("Topic has existing shared producers")
            self._take_epoch(producer)
            return True
        if mode == EXCLUSIVE_WITH_FENCING:
            self._check_epoch(producer)
            for p in attached:
                p.cnx.broker_closed_producer(p)
                self.topic.remove_producer(p)
            self._take_epoch(producer)
            return True
        if mode == WAIT_FOR_EXCLUSIVE:
            self._check_epoch(producer)  # a fenced holder reconnecting is refused, not queued
            if not attached and not self.waiting:
                self._take_epoch(producer)
                return True
            if len(self.waiting) >= MAX_WAITING_PRODUCERS:
                raise errors.ProducerBusyError("Too many producers waiting for exclusive access")
            if not self.waiting:
                self.waiting = deque()
            self.waiting.append((producer, request_id))  # type: ignore[union-attr]
            return False
        raise errors.NotAllowedError(f"Unknown producer access mode {mode}")

    def _check_epoch(self, producer: Producer) -> None:
        asked = producer.topic_epoch
        if asked is not None and self.epoch is not None and asked < self.epoch:
            raise errors.ProducerFencedError(
                f"Topic epoch has already moved. Current epoch: {self.epoch}, Producer epoch: {asked}"
            )

    def _take_epoch(self, producer: Producer) -> None:
        """An exclusive producer takes the topic: a reconnect keeps its epoch, a newcomer moves it on."""
        self._check_epoch(producer)
        asked = producer.topic_epoch
        if asked is not None and (self.epoch is None or asked >= self.epoch):
            self.epoch = asked  # the holder reconnecting (or a reloaded topic learning its epoch)
        else:
            self.epoch = (self.epoch if self.epoch is not None else -1) + 1
        producer.topic_epoch = self.epoch

    def forget(self, producer: Producer) -> None:
        left = [(p, r) for p, r in self.waiting if p is not producer]
        self.waiting = deque(left) if left else ()

    def next_ready(self) -> tuple[Producer, int] | None:
        """When the topic has no producer left: the first waiting producer still connected."""
        if self.topic.producers:
            return None
        while self.waiting:
            producer, request_id = self.waiting.popleft()
            if not producer.cnx.closed and producer.cnx.producers.get(producer.producer_id) is producer:
                self.epoch = (self.epoch if self.epoch is not None else -1) + 1
                producer.topic_epoch = self.epoch
                return producer, request_id
        return None
