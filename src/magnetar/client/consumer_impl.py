"""The consumer of one topic or partition: subscription, permits, incoming messages, seek, reconnects.

Theory of operation: a :class:`PartitionConsumer` subscribes on the owner
broker's connection (lookup, SUBSCRIBE, then FLOW for ``receiver_queue_size``
permits) and turns every MESSAGE into :class:`Message` objects
(``decode.MessageDecoder``; a corrupt entry is acked with a validation error,
as the official clients do) put on its parent's queue (one queue for all
partitions and topics of a multi-topic consumer). Every message the application
takes gives back a permit; FLOW is sent when half the queue was freed.
Skipped messages give their permits back at once.

Acks, negative acks, ack timeouts and dead-lettering are the
``consumer_acks.AckingMixin`` half of the class; its tick task (started by
``start``) flushes grouped acks and sends redeliveries that came due. The
settings are one ``consumer_conf.ConsumerConf`` shared by all partitions.

When the connection drops or the broker sends CLOSE_CONSUMER (after a seek,
an unload), the consumer drops its queued messages (they will come again),
re-subscribes with backoff -- a reader from the last message it handed out --
and grants fresh permits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from magnetar.client.acks import AckGrouper, RedeliveryTracker
from magnetar.client.connection import ClientCnx
from magnetar.client.consumer_acks import AckingMixin
from magnetar.client.consumer_conf import ConsumerConf
from magnetar.client.decode import MessageDecoder
from magnetar.client.errors import AlreadyClosed, PulsarException
from magnetar.client.message import Message
from magnetar.common.backoff import Backoff, BackoffConfig
from magnetar.protocol import client_commands
from magnetar.protocol.enums import (
    AckType,
    CommandType,
    ServerError,
    SubType,
    ValidationError,
)
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.frames import Frame
from magnetar.protocol.message_id import MessageId
from magnetar.runtime.rng import Rng

__all__ = ["ConsumerConf", "PartitionConsumer"]

log = logging.getLogger(__name__)
T = CommandType
_FATAL = {
    ServerError.ConsumerBusy, ServerError.AuthorizationError, ServerError.AuthenticationError,
    ServerError.IncompatibleSchema, ServerError.InvalidTopicName, ServerError.NotAllowedError,
    ServerError.TopicNotFound, ServerError.SubscriptionNotFound,
}  # fmt: skip


class PartitionConsumer(AckingMixin):
    def __init__(self, parent: Any, topic: str, partition: int, conf: ConsumerConf) -> None:
        self.parent = parent
        self.client = parent.client
        self.topic = topic
        self.partition = partition
        self.conf = conf
        self.consumer_id = self.client.next_consumer_id()
        self._cnx: ClientCnx | None = None
        self._ready = False
        self._connected = asyncio.Event()  # set while _ready (seek, last-id wait for a reconnect)
        self._closed = False
        self._permits = 0
        self._decoder = MessageDecoder(
            topic, partition, conf.max_pending_chunked_messages, conf.expire_incomplete_chunks_ms
        )
        self._decoder.start_id, self._decoder.start_inclusive = conf.start_message_id, conf.start_inclusive
        self._last_msg: Any = None  # the last Message handed out (its id is built when needed)
        self._acks = AckGrouper(conf.batch_index_ack_enabled)
        self._redeliver = RedeliveryTracker()
        self._tick_task: asyncio.Task[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self.is_active: bool | None = None
        self.reached_end = False

    # ------------------------------------------------------------------ subscribe
    async def start(self) -> None:
        await self._subscribe()
        self._tick_task = asyncio.create_task(self._tick_loop())

    async def _subscribe(self) -> None:
        logical, physical = await self.client.lookup.lookup(self.topic)
        cnx = await self.client.pool.get(logical, physical)
        c = self.conf
        start = None
        if not c.durable and self._decoder.start_id is not None:
            start = self._decoder.start_id
        cnx.add_consumer(self.consumer_id, self)
        try:
            await cnx.request(
                T.SUBSCRIBE,
                lambda rid: client_commands.subscribe(
                    self.topic, c.subscription, c.sub_type, self.consumer_id, rid, c.consumer_name,
                    priority_level=c.priority_level, durable=c.durable, start_message_id=start,
                    metadata=c.properties, read_compacted=c.read_compacted, schema=c.schema,
                    initial_position=c.initial_position,
                    replicate_subscription_state=c.replicate_subscription_state,
                    key_shared=c.key_shared if c.sub_type == SubType.Key_Shared else None,
                    subscription_properties=c.subscription_properties,
                ),
            )  # fmt: skip
        except BaseException:
            cnx.remove_consumer(self.consumer_id)
            raise
        self._cnx = cnx
        self._ready = True
        self._connected.set()
        self._permits = 0
        if c.receiver_queue_size > 0:
            cnx.write(client_commands.flow(self.consumer_id, c.receiver_queue_size))

    # ------------------------------------------------------------------ incoming
    def handle_frame(self, frame: Frame) -> None:
        ftype = frame.type
        if ftype is T.MESSAGE:
            try:
                self._on_message(frame)
            except ProtocolError as exc:
                log.warning("%s: dropping undecodable message: %s", self.topic, exc)
                self._discard(frame, ValidationError.BatchDeSerializeError)
        elif ftype in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
            self._lost_connection()
        elif ftype is T.ACTIVE_CONSUMER_CHANGE:
            self.is_active = frame.command.is_active
        elif ftype is T.REACHED_END_OF_TOPIC:
            self.reached_end = True

    def _discard(self, frame: Frame, error: ValidationError) -> None:
        cmd: Any = frame.command
        mid = MessageId(cmd.message_id.ledgerId, cmd.message_id.entryId)
        if self._cnx is not None and not self._cnx.is_closed:
            self._cnx.write(
                client_commands.ack(self.consumer_id, AckType.Individual, [mid], validation_error=error)
            )
        self._give_back(1)

    def _on_message(self, frame: Frame) -> None:
        result = self._decoder.decode(frame, self)
        if result is None:
            self._discard(frame, ValidationError.ChecksumMismatch)
            return
        messages, skipped = result
        put = self.parent.queue.put
        for msg in messages:
            put(msg)
        if skipped:
            self._give_back(skipped)

    @property
    def last_dequeued(self) -> MessageId | None:
        return self._last_msg.message_id() if self._last_msg is not None else None

    def seed_batch(self, mid: MessageId, remaining: set[int]) -> None:
        """A redelivered batch: start its ack tracking from the broker's view."""
        self._acks.batches.seed(mid.ledger_id, mid.entry_id, remaining)

    # ------------------------------------------------------------------ permits
    def message_dequeued(self, msg: Message) -> None:
        """The application took ``msg``: a permit comes back, ack timeout starts."""
        self._last_msg = msg
        if self.conf.ack_timeout_ms > 0:
            self._redeliver.schedule(
                msg.message_id(), time.monotonic() + self.conf.ack_timeout_ms / 1000, msg
            )
        self._give_back(1)

    def _give_back(self, n: int) -> None:
        size = self.conf.receiver_queue_size
        if size <= 0:
            return
        self._permits += n
        if self._permits >= max(1, size // 2) and self._ready and self._cnx is not None:
            permits, self._permits = self._permits, 0
            with contextlib.suppress(PulsarException):
                self._cnx.write(client_commands.flow(self.consumer_id, permits))

    def flow(self, n: int) -> None:
        if self._ready and self._cnx is not None:
            self._cnx.write(client_commands.flow(self.consumer_id, n))

    # ------------------------------------------------------------------ seek, last id
    async def seek(self, target: MessageId | int) -> None:
        cnx = await self._wait_cnx()
        if isinstance(target, MessageId):
            self._decoder.start_id, self._decoder.start_inclusive = target, True
            build = lambda rid: client_commands.seek(self.consumer_id, rid, message_id=target)  # noqa: E731
        else:
            self._decoder.start_id = None
            build = lambda rid: client_commands.seek(self.consumer_id, rid, message_publish_time=target)  # noqa: E731
        self._last_msg = None
        await cnx.request(T.SEEK, build)
        self.parent.queue.remove_if(lambda m: m._consumer is self)
        self._acks.take()
        self._acks.batches.clear()
        self._redeliver.clear()

    async def get_last_message_id(self) -> tuple[MessageId, MessageId | None]:
        cnx = await self._wait_cnx()
        frame = await cnx.request(
            T.GET_LAST_MESSAGE_ID, lambda rid: client_commands.get_last_message_id(self.consumer_id, rid)
        )
        resp: Any = frame.command
        last = MessageId.from_pb(resp.last_message_id)
        last = MessageId(last.ledger_id, last.entry_id, self.partition, last.batch_index)
        mark = None
        if resp.HasField("consumer_mark_delete_position"):
            mark = MessageId.from_pb(resp.consumer_mark_delete_position)
        return last, mark

    async def _wait_cnx(self) -> ClientCnx:
        """The connection, waiting (up to the operation timeout) while a reconnect is under way."""
        if not self._closed and not self._ready:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._connected.wait(), self.client.pool.config.operation_timeout_s)
        return self._require_cnx()

    def _require_cnx(self) -> ClientCnx:
        if self._closed:
            raise AlreadyClosed(f"consumer on {self.topic} is closed")
        if self._cnx is None or not self._ready:
            raise PulsarException(f"consumer on {self.topic} is not connected")
        return self._cnx

    # ------------------------------------------------------------------ reconnect
    def connection_closed(self, cnx: ClientCnx) -> None:
        if cnx is self._cnx:
            self._lost_connection()

    def _lost_connection(self) -> None:
        self._ready = False
        self._connected.clear()
        if self._cnx is not None:
            self._cnx.remove_consumer(self.consumer_id)
        self._cnx = None
        if self._closed:
            return
        self.parent.queue.remove_if(lambda m: m._consumer is self)
        if not self.conf.durable and self.last_dequeued is not None:
            self._decoder.start_id, self._decoder.start_inclusive = self.last_dequeued, False
        self._acks.batches.clear()
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = Backoff(BackoffConfig(100, 30_000), Rng())
        while not self._closed:
            await asyncio.sleep(backoff.next_s())
            try:
                await self._subscribe()
                return
            except PulsarException as exc:
                if getattr(exc, "code", None) in _FATAL and exc.code != ServerError.ConsumerBusy:
                    log.error("%s: cannot re-subscribe: %s", self.topic, exc)
                    return
                log.info("%s: re-subscribe failed (%s); retrying", self.topic, exc)
            except OSError as exc:
                log.info("%s: re-subscribe failed (%s); retrying", self.topic, exc)

    # ------------------------------------------------------------------ close
    async def close(self, unsubscribe: bool = False) -> None:
        if self._closed:
            return
        self.flush_acks()
        cnx = self._cnx
        if unsubscribe:
            await self._require_cnx().request(
                T.UNSUBSCRIBE, lambda rid: client_commands.unsubscribe(self.consumer_id, rid)
            )
        self._closed = True
        for task in (self._tick_task, self._reconnect_task):
            if task is not None:
                task.cancel()
        self._ready = False
        self._cnx = None
        if cnx is not None and not cnx.is_closed:
            if not unsubscribe:
                with contextlib.suppress(PulsarException):
                    await cnx.request(T.CLOSE_CONSUMER, lambda rid: _close_consumer(self.consumer_id, rid))
            cnx.remove_consumer(self.consumer_id)


def _close_consumer(consumer_id: int, request_id: int) -> bytes:
    from magnetar.protocol.server_commands import close_consumer

    return close_consumer(consumer_id, request_id)
