"""The application's consumer: one queue over one or many topics and partitions.

Theory of operation: ``Client.subscribe`` resolves what to subscribe to -- a
topic, a list of topics, or a regex over a namespace -- expands partitioned
topics into their partitions, and starts one ``PartitionConsumer`` per
partition or topic. All of them put their messages on this consumer's one
:class:`MessageQueue`, so ``receive()`` (or ``async for msg in consumer``)
sees every topic, each in its own order. A message remembers which child
received it; ``acknowledge``, ``negative_acknowledge`` and cumulative acks go
to that child. Taking a message from the queue tells its child, which gives
the broker a permit back (the receiver queue bounds memory per child).

A pattern consumer's topics are kept equal to the matching ones by
``pattern.PatternDiscovery`` (topic-list watcher, or polling), through
``reconcile_topics``. Dead-letter publishing uses
one lazily created producer per consumer; ``reconsume_later`` publishes to
the retry topic (``<topic>-<subscription>-RETRY``, subscribed along with the
topic when ``retry_enable`` is set) with a delivery delay and a
``RECONSUMETIMES`` count, and to the dead-letter topic past the limit. ``txn=`` on acks
acknowledges inside a transaction (held by the broker until it commits; whole entries).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from magnetar.client.consumer_impl import ConsumerConf, PartitionConsumer
from magnetar.client.errors import AlreadyClosed, InvalidConfiguration, NotSupported, Timeout
from magnetar.client.message import Message
from magnetar.client.transaction import check_transaction
from magnetar.protocol.enums import SubType
from magnetar.protocol.message_id import MessageId

log = logging.getLogger(__name__)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(Timeout("no message received in time"))


class MessageQueue:
    """An unbounded FIFO of messages with awaitable ``get`` and selective removal."""

    def __init__(self) -> None:
        self._items: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, msg: Message) -> None:
        self._items.append(msg)
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
                break

    def get_nowait(self) -> Message | None:
        return self._items.popleft() if self._items else None

    async def get(self, timeout_s: float | None) -> Message:
        """Wait for a message: one future per wait and, with a timeout, one timer (no wait_for task)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._items:
            w = loop.create_future()
            self._waiters.append(w)
            timer = None
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    w.cancel()
                    raise Timeout("no message received in time")
                timer = loop.call_later(remaining, _expire, w)
            try:
                await w
            finally:
                if timer is not None:
                    timer.cancel()
                if not w.done():
                    w.cancel()
        return self._items.popleft()

    def remove_if(self, pred: Callable[[Message], bool]) -> int:
        kept = deque(m for m in self._items if not pred(m))
        removed = len(self._items) - len(kept)
        self._items = kept
        return removed


class Consumer:
    def __init__(self, client: Any, subscription: str, conf: ConsumerConf, schema: Any) -> None:
        self.client = client
        self.schema = schema
        self.queue = MessageQueue()
        self._subscription = subscription
        self._conf = conf
        self._children: dict[str, PartitionConsumer] = {}
        self._topics: list[str] = []
        self._closed = False
        self.discovery: Any = None  # pattern.PatternDiscovery of a regex consumer
        self._partitions_task: asyncio.Task[None] | None = None
        self._partitioned: dict[str, int] = {}
        self._dlq_producer: Any = None
        self._retry_producer: Any = None
        self.retry_topic: str | None = None
        self._dlq_lock = asyncio.Lock()
        self._zero_queue = conf.receiver_queue_size == 0
        self._resolver: Any = None  # schema_auto.SchemaResolver for AUTO_CONSUME / Avro versions

    # ------------------------------------------------------------------ setup
    async def add_topic(self, topic: str, first_partition: int = 0) -> None:
        """Subscribe to ``topic`` (all its partitions from ``first_partition`` if partitioned)."""
        n = await self.client.lookup.partitions(topic)
        if n > 0:
            self._partitioned[topic] = n
        names = [(f"{topic}-partition-{i}", i) for i in range(first_partition, n)] if n > 0 else [(topic, -1)]
        if first_partition and not names:
            return
        children = [PartitionConsumer(self, name, i, self._conf) for name, i in names]
        results = await asyncio.gather(*(c.start() for c in children), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(c.close() for c in children), return_exceptions=True)
            raise errors[0]
        for c in children:
            self._children[c.topic] = c
        if topic not in self._topics:
            self._topics.append(topic)
        if self._partitions_task is None and self._partitioned and self.client.partitions_update_s > 0:
            self._partitions_task = asyncio.create_task(self._partitions_loop())

    async def _partitions_loop(self) -> None:
        """Notice partitions added to partitioned topics (Pulsar's autoUpdatePartitions)."""
        while not self._closed:
            await asyncio.sleep(self.client.partitions_update_s)
            for topic, known in list(self._partitioned.items()):
                try:
                    if await self.client.lookup.partitions(topic) > known:
                        await self.add_topic(topic, first_partition=known)
                except Exception as exc:
                    log.warning("partition update of %s failed: %s", topic, exc)

    async def remove_topic(self, topic: str) -> None:
        self._topics = [t for t in self._topics if t != topic]
        for name in [n for n in self._children if n == topic or n.startswith(topic + "-partition-")]:
            child = self._children.pop(name)
            self.queue.remove_if(lambda m, c=child: m._consumer is c)
            await child.close()

    async def reconcile_topics(self, wanted: list[str]) -> None:
        """Subscribe to the wanted topics not yet subscribed; drop the topics no longer wanted."""
        for topic in wanted:
            if topic not in self._topics and not self._closed:
                await self.add_topic(topic)
        gone = set(self._topics) - set(wanted)
        for topic in [t for t in self._topics if t in gone]:
            await self.remove_topic(topic)

    # ------------------------------------------------------------------ receiving
    def topic(self) -> str:
        return self._topics[0] if len(self._topics) == 1 else ",".join(self._topics)

    def subscription_name(self) -> str:
        return self._subscription

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` if none arrived within ``timeout_millis``."""
        if self._closed:
            raise AlreadyClosed("consumer is closed")
        items = self.queue._items
        if items:  # fast path: no waiting, no timer
            msg = items.popleft()
        else:
            if self._zero_queue:
                for child in self._children.values():
                    child.flow(1)
            msg = await self.queue.get(None if timeout_millis is None else timeout_millis / 1000.0)
        msg._consumer.message_dequeued(msg)
        if self._resolver is not None:
            msg._schema = await self._resolver.schema_for(msg._topic, msg._schema_version)
        return msg

    async def batch_receive(
        self, max_num_messages: int = 100, max_num_bytes: int = 10 * 1024 * 1024, timeout_ms: int = 100
    ) -> list[Message]:
        """Messages until ``max_num_messages`` / ``max_num_bytes`` or ``timeout_ms`` (maybe none)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        out: list[Message] = []
        nbytes = 0
        while len(out) < max_num_messages and nbytes < max_num_bytes:
            remaining = deadline - loop.time()
            if remaining <= 0 and not len(self.queue):
                break
            try:
                msg = await self.receive(max(1, int(remaining * 1000)) if not len(self.queue) else None)
            except Timeout:
                break
            out.append(msg)
            nbytes += len(msg.data())
        return out

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except AlreadyClosed:
            raise StopAsyncIteration from None

    # ------------------------------------------------------------------ acks
    def _child_of(self, message: Message | MessageId) -> tuple[PartitionConsumer, MessageId, tuple]:
        if isinstance(message, Message):
            return message._consumer, message.message_id(), message._chunk_ids
        if len(self._children) == 1:
            return next(iter(self._children.values())), message, ()
        for child in self._children.values():
            if child.partition == message.partition:
                return child, message, ()
        raise InvalidConfiguration(
            f"cannot tell which topic message id {message} belongs to; pass the Message"
        )

    async def acknowledge(self, message: Message | MessageId, txn: Any = None) -> None:
        if txn is not None:
            await self._ack_in_txn(message, txn, cumulative=False)
            return
        if type(message) is Message:
            mid = message._id
            if type(mid) is tuple:
                message._consumer.acknowledge_raw(mid)
            else:
                message._consumer.acknowledge(mid, message._chunk_ids)
            return
        child, mid, chunks = self._child_of(message)
        child.acknowledge(mid, chunks)

    async def acknowledge_cumulative(self, message: Message | MessageId, txn: Any = None) -> None:
        if self._conf.sub_type in (SubType.Shared, SubType.Key_Shared):
            raise InvalidConfiguration(
                "cumulative acks are not allowed on Shared and Key_Shared subscriptions"
            )
        if txn is not None:
            await self._ack_in_txn(message, txn, cumulative=True)
            return
        child, mid, chunks = self._child_of(message)
        child.acknowledge_cumulative(chunks[-1] if chunks else mid)

    async def _ack_in_txn(self, message: Message | MessageId, txn: Any, cumulative: bool) -> None:
        """A transactional ack (client.transaction): the partition's subscription is added to
        the transaction, then the ACK (whole entries) waits for the broker's answer --
        TransactionConflict when another transaction holds the message."""
        check_transaction(txn)
        child, mid, chunks = self._child_of(message)
        await txn.register_acked_topic(child.topic, self._subscription)
        await child.acknowledge_in_txn(list(chunks) or [mid], txn.txn_id, cumulative)

    async def negative_acknowledge(self, message: Message) -> None:
        if not isinstance(message, Message):
            raise InvalidConfiguration("negative_acknowledge needs the Message")
        message._consumer.negative_acknowledge(message)

    async def redeliver_unacknowledged_messages(self) -> None:
        for child in self._children.values():
            child.redeliver_all()

    async def send_to_dead_letter(
        self, child: PartitionConsumer, msg: Message, props: dict[str, str] | None = None
    ) -> None:
        async with self._dlq_lock:
            if self._dlq_producer is None:
                # named after the consumer's (first) topic, not the retry topic it may come from
                base = (self._topics[0] if self._topics else child.topic).split("-partition-")[0]
                topic = self._conf.dead_letter_topic or f"{base}-{self._subscription}-DLQ"
                self._dlq_producer = await self.client.create_producer(
                    topic,
                    batching_enabled=False,
                    initial_subscription_name=self._conf.dlq_initial_subscription,
                )
        if props is None:
            props = msg.properties()
            props.setdefault("REAL_TOPIC", msg.topic_name())
            props.setdefault("ORIGIN_MESSAGE_ID", str(msg.message_id()))
        await self._dlq_producer.send(
            msg.data(),
            properties=props,
            partition_key=msg.partition_key() if msg.has_key() else None,
            event_timestamp=msg.event_timestamp() or None,
        )

    async def reconsume_later(
        self, message: Message, delay_ms: float, properties: dict[str, str] | None = None
    ) -> None:
        """Ack ``message`` and publish it again to the retry topic, delivered ``delay_ms`` later.

        After ``max_redeliver_count`` reconsumes it goes to the dead-letter topic instead.
        """
        if self.retry_topic is None:
            raise InvalidConfiguration("subscribe with retry_enable=True to use reconsume_later")
        props = message.properties()
        props.update(properties or {})
        times = int(props.get("RECONSUMETIMES", "0")) + 1
        props.setdefault("REAL_TOPIC", message.topic_name())
        props.setdefault("ORIGIN_MESSAGE_ID", str(message.message_id()))
        props["RECONSUMETIMES"] = str(times)
        props["DELAY_TIME"] = str(int(delay_ms))
        if self._conf.max_redeliver_count and times > self._conf.max_redeliver_count:
            await self.send_to_dead_letter(message._consumer, message, props)
        else:
            async with self._dlq_lock:
                if self._retry_producer is None:
                    self._retry_producer = await self.client.create_producer(
                        self.retry_topic, batching_enabled=False
                    )
            await self._retry_producer.send(
                message.data(),
                properties=props,
                partition_key=message.partition_key() if message.has_key() else None,
                deliver_after=delay_ms / 1000.0,
            )
        await self.acknowledge(message)

    # ------------------------------------------------------------------ seek, state
    async def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id or to a publish time (ms since the epoch)."""
        children = list(self._children.values())
        if isinstance(target, MessageId) and len(children) > 1 and target.partition >= 0:
            children = [c for c in children if c.partition == target.partition]
        await asyncio.gather(*(c.seek(target) for c in children))

    async def get_last_message_id(self) -> MessageId:
        if len(self._children) != 1:
            raise NotSupported("get_last_message_id needs a single-topic, non-partitioned consumer")
        last, _ = await next(iter(self._children.values())).get_last_message_id()
        return last

    def is_connected(self) -> bool:
        return all(c._ready for c in self._children.values())

    def has_reached_end_of_topic(self) -> bool:
        return bool(self._children) and all(c.reached_end for c in self._children.values())

    async def unsubscribe(self) -> None:
        await asyncio.gather(*(c.close(unsubscribe=True) for c in self._children.values()))
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._partitions_task is not None:
            self._partitions_task.cancel()
        if self.discovery is not None:
            await self.discovery.close()
        await asyncio.gather(*(c.close() for c in self._children.values()), return_exceptions=True)
        for extra in (self._dlq_producer, self._retry_producer):
            if extra is not None:
                with contextlib.suppress(Exception):
                    await extra.close()
        for w in self.queue._waiters:
            if not w.done():
                w.set_exception(AlreadyClosed("consumer closed"))
        self.client._forget(self)

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
