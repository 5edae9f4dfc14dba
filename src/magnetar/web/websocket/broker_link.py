"""The one place the WebSocket API touches broker internals: an in-process "connection".

Theory of operation: Pulsar's WebSocket service drives a Pulsar client against
the broker.  Magnetar has no native client yet, so a WebSocket session drives
the broker *in process* through a :class:`BrokerLink`: an object that stands
where a binary-protocol ``Connection`` stands.  Requests are the real wire
commands (built with ``protocol.client_commands`` and decoded with the codec)
handed to the broker's own command handlers, so every rule of the binary path
applies unchanged -- topic auto-creation, policies, quotas, schemas,
deduplication, subscription types, rate limits.  What the broker says back
comes through the duck-typed callbacks the producer and consumer objects call
on their connection (``send_receipt``, ``publish_failed``, ``send_message``,
``broker_closed_*``), which the link turns into calls on a
:class:`LinkListener` (the WebSocket session).  Handler replies written as
frames (PRODUCER_SUCCESS, SUCCESS) are not needed -- a failure arrives as the
handler's exception -- so ``write`` drops them.

Authorization is done before the upgrade (``web.auth`` rules for the ``/ws``
routes), exactly where the binary path does it for PRODUCER/SUBSCRIBE.

What it shares with the binary ``Connection`` -- the producer and consumer
tables, the interceptors' dispatch hook, forgetting what the broker closed,
the teardown -- it inherits from ``broker.service.transport_cnx.TransportCnx``.

Lifecycle: OPEN until :meth:`BrokerLink.close`, which removes the link's
producers and consumers from their topics (unacked messages are redelivered
to other consumers), as a closing TCP connection does, after giving the
producers' publishes in flight a moment to be answered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from magnetar.broker import errors
from magnetar.broker.service.handlers import consumer as consumer_handlers
from magnetar.broker.service.handlers import producer as producer_handlers
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.transport_cnx import TransportCnx
from magnetar.managed_ledger.api import Position
from magnetar.protocol import client_commands as cc
from magnetar.protocol.enums import AckType, InitialPosition, SubType
from magnetar.protocol.frames import decode_frame_body
from magnetar.protocol.message_id import MessageId


class LinkListener(Protocol):
    def on_receipt(self, sequence_id: int, ledger_id: int, entry_id: int, partition: int) -> None: ...
    def on_send_failed(self, sequence_id: int, error: errors.BrokerError) -> None: ...
    def on_message(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, data: bytes, redelivery: int
    ) -> None: ...
    def on_closed_by_broker(self, what: str) -> None: ...


@dataclass(frozen=True)
class TopicInfo:
    full_name: str
    partitions: int  # 0: not partitioned


def _frame(raw: bytes) -> Any:
    return decode_frame_body(memoryview(raw)[4:])


PRODUCER_DRAIN_S = 5.0  # at close, publishes in flight get this long to be answered


class BrokerLink(TransportCnx):
    """Stands for a client connection; the broker's Producer/Consumer objects call it back."""

    def __init__(self, service: Any, listener: LinkListener, peer_address: str) -> None:
        super().__init__(service, peer_address, "websocket")
        self.listener = listener
        self.writable = True  # the session lowers it while its socket is backed up
        self._next_id = 0
        self._pending_publishes = 0

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    # ------------------------------------------------------------ topics
    async def topic_info(self, topic: str) -> TopicInfo:
        """Resolve a topic: raises TopicNotFound/NamespaceNotFound as lookup would."""
        ref = parse_topic(topic)
        n = await self.service.get_partitioned_metadata(ref.full_name, check_allow_auto_creation=True)
        return TopicInfo(ref.full_name, n)

    async def topics_matching(self, pattern: str) -> list[str]:
        """Existing topics of the pattern's namespace whose full name matches the regex
        (partitions collapse to their partitioned topic)."""
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise errors.InvalidTopicNameError(f"Invalid topicsPattern: {exc}") from None
        domain, _, rest = pattern.partition("://")
        namespace = "/".join(rest.split("/")[:2])
        mode = "NON_PERSISTENT" if domain == "non-persistent" else "PERSISTENT"
        names = await self.service.list_topics(namespace, mode)
        bases = {n.split("-partition-")[0] if "-partition-" in n else n for n in names}
        return sorted(n for n in bases if regex.fullmatch(n))

    def is_end_of_topic(self, consumer_id: int) -> bool:
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            return False
        sub = consumer.subscription
        return sub.topic.terminated and sub.backlog() == 0 and not consumer.pending_acks

    # ------------------------------------------------------------ producing
    async def create_producer(
        self, topic: str, name: str | None, initial_sequence_id: int = -1
    ) -> tuple[int, str]:
        pid = self._id()
        raw = cc.producer(topic, pid, self._id(), name, user_provided_producer_name=name is not None)
        await producer_handlers.handle_producer(self, _frame(raw))
        return pid, self.producers[pid].producer_name

    def publish(
        self,
        producer_id: int,
        sequence_id: int,
        headers_and_payload: bytes,
        num_messages: int | None = None,
        highest_sequence_id: int | None = None,
    ) -> None:
        """Start storing one entry (a batch of ``num_messages`` when given); the outcome arrives
        as on_receipt / on_send_failed for ``sequence_id``."""
        raw = cc.send(
            producer_id,
            sequence_id,
            headers_and_payload,
            num_messages,
            highest_sequence_id=highest_sequence_id,
        )
        producer_handlers.handle_send(self, _frame(raw))

    # ------------------------------------------------------------ consuming
    async def subscribe(
        self,
        topic: str,
        subscription: str,
        sub_type: int,
        consumer_name: str = "",
        *,
        durable: bool = True,
        start: MessageId | None = None,
        initial_earliest: bool = False,
        priority_level: int = 0,
    ) -> int:
        cid = self._id()
        raw = cc.subscribe(
            topic,
            subscription,
            SubType(sub_type),
            cid,
            self._id(),
            consumer_name,
            priority_level=priority_level,
            durable=durable,
            start_message_id=start,
            initial_position=InitialPosition.Earliest if initial_earliest else InitialPosition.Latest,
        )
        await consumer_handlers.handle_subscribe(self, _frame(raw))
        return cid

    def flow(self, consumer_id: int, permits: int) -> None:
        if permits > 0:
            consumer_handlers.handle_flow(self, _frame(cc.flow(consumer_id, permits)))

    async def ack(self, consumer_id: int, ids: Sequence[tuple[int, int]]) -> None:
        mids = [MessageId(ledger, entry) for ledger, entry in ids]
        await consumer_handlers.handle_ack(self, _frame(cc.ack(consumer_id, AckType.Individual, mids)))

    async def redeliver(self, consumer_id: int, ids: Sequence[tuple[int, int]]) -> None:
        raw = cc.redeliver_unacknowledged(consumer_id, [MessageId(ledger, entry) for ledger, entry in ids])
        await consumer_handlers.handle_redeliver(self, _frame(raw))

    async def unsubscribe(self, consumer_id: int) -> None:
        await consumer_handlers.handle_unsubscribe(self, _frame(cc.unsubscribe(consumer_id, self._id())))

    def in_flight(self, consumer_id: int) -> set[tuple[int, int]]:
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            return set()
        return {(p.ledger_id, p.entry_id) for p in consumer.pending_acks}

    # ------------------------------------------------------------ what the broker calls
    def write(self, data: bytes) -> None:
        """Handler replies (PRODUCER_SUCCESS, SUCCESS, ...): failures arrive as exceptions instead."""

    def publish_started(self) -> None:
        self._pending_publishes += 1

    def _publish_done(self) -> None:
        self._pending_publishes -= 1

    def pause_reading(self, delay_s: float) -> None:
        """Publish rate limiting: the session stops reading its socket for a while."""
        pause = getattr(self.listener, "pause_reading", None)
        if pause is not None:
            pause(delay_s)

    def send_receipt(self, producer: Any, sequence_id: int, highest: int | None, pos: Position) -> None:
        self._publish_done()
        self.listener.on_receipt(sequence_id, pos.ledger_id, pos.entry_id, producer.topic.partition_index)

    def publish_failed(self, producer: Any, sequence_id: int, exc: BaseException) -> None:
        self._publish_done()
        self.listener.on_send_failed(sequence_id, errors.translate(exc))

    def publish_abandoned(self) -> None:
        self._publish_done()

    def producer_ready(self, producer: Any, request_id: int) -> None:
        pass

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        pass

    def send_message(
        self,
        consumer_id: int,
        pos: Position,
        partition: int,
        data: bytes,
        redelivery_count: int,
        ack_set: list[int] | None,
    ) -> None:
        self.intercept_dispatch(consumer_id, pos, data)
        self.listener.on_message(consumer_id, pos.ledger_id, pos.entry_id, partition, data, redelivery_count)

    def broker_closed_producer(self, producer: Any) -> None:
        if self.forget_producer(producer):
            self.listener.on_closed_by_broker("producer")

    def broker_closed_consumer(self, consumer: Any) -> None:
        if self.forget_consumer(consumer):
            self.listener.on_closed_by_broker("consumer")

    async def check_liveness(self, timeout_s: float) -> bool:
        return not self.closed

    # ------------------------------------------------------------ teardown
    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self.release_clients(drain_s=PRODUCER_DRAIN_S)
