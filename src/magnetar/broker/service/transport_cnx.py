"""What every client "connection" of the broker shares, whatever carries its frames.

Theory of operation: two things stand where a client connection stands --
the binary-protocol :class:`~magnetar.broker.service.connection.Connection`
(a socket) and the WebSocket API's ``BrokerLink`` (an in-process session on
the web layer), Pulsar's ``TransportCnx``.  Both hand commands to the same
handlers, which keep the connection's producers and consumers in its tables;
both are called back by producers, consumers and dispatchers through
``api.Connection``.  This base holds what is the same in both, once:

* the tables (``producers``, ``consumers`` by id) and the producers the broker
  closed lately (SENDs already in flight for them are dropped, not fatal);
* the dispatch hook of the broker interceptors, run for every message sent;
* forgetting a producer/consumer the broker dropped (unload, delete): only
  when it is still this connection's;
* the teardown that releases every producer and consumer from its topic
  (unacknowledged messages go back for redelivery), optionally letting
  producers' stored-but-unanswered publishes finish first.

What differs -- how frames and receipts travel, back-pressure, liveness --
stays in the subclasses.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from magnetar.managed_ledger.api import Position

if TYPE_CHECKING:
    from magnetar.broker.service.consumer import Consumer
    from magnetar.broker.service.producer import Producer

log = logging.getLogger(__name__)

MAX_REMEMBERED_CLOSED_PRODUCERS = 1024


class TransportCnx:
    def __init__(self, service: Any, peer_address: str, client_version: str = "") -> None:
        self.service = service
        self.peer_address = peer_address
        self.client_version = client_version
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.recently_closed_producers: dict[int, None] = {}
        self.closed = False

    def intercept_dispatch(self, consumer_id: int, pos: Position, data: bytes) -> None:
        """The interceptors' on_message_dispatch, before a message goes to a consumer."""
        ic = self.service.interceptor
        if ic is not None:
            ic.on_message_dispatch(self.consumers.get(consumer_id), pos.ledger_id, pos.entry_id, data)

    def forget_producer(self, producer: Producer) -> bool:
        """The broker dropped ``producer``; True when it was still this connection's."""
        if self.producers.get(producer.producer_id) is not producer:
            return False
        del self.producers[producer.producer_id]
        # SENDs already on the wire are dropped, not fatal: the client re-sends every
        # unacknowledged message once it has re-created the producer.
        self.recently_closed_producers[producer.producer_id] = None
        while len(self.recently_closed_producers) > MAX_REMEMBERED_CLOSED_PRODUCERS:
            del self.recently_closed_producers[next(iter(self.recently_closed_producers))]
        return True

    def forget_consumer(self, consumer: Consumer) -> bool:
        """The broker dropped ``consumer``; True when it was still this connection's."""
        if self.consumers.get(consumer.consumer_id) is not consumer:
            return False
        del self.consumers[consumer.consumer_id]
        return True

    async def release_clients(self, drain_s: float = 0.0) -> None:
        """Teardown: every producer and consumer leaves its topic.  With ``drain_s`` > 0 the
        producers' publishes in flight are given that long to be answered first."""
        for producer in list(self.producers.values()):
            if drain_s > 0:
                producer.mark_closing()
                await producer.wait_drained(drain_s)
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            try:
                await consumer.subscription.topic.remove_consumer(consumer)
            except Exception:
                log.debug("removing consumer %s failed", consumer.consumer_id, exc_info=True)
        self.consumers.clear()
