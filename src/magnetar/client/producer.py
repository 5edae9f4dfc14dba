"""The application's producer: one topic, partitioned or not, with Pulsar's routing.

Theory of operation: ``Client.create_producer`` asks for the topic's
partition count and builds one :class:`PartitionProducer` per partition (or
one for a non-partitioned topic), all registered before it returns. Each
``send`` picks a partition:

* a message with a key (``partition_key``, else ``ordering_key``) goes to
  ``hash(key) % partitions`` with the ``hashing_scheme``'s hash
  (``client.hashing``): ``BoostHash`` by default, as the official Python
  client, so keys land on the same partitions; ``Murmur3_32Hash`` or
  ``JavaStringHash`` to match Java clients;
* otherwise ``RoundRobinDistribution`` rotates: per message without batching,
  and per batching window with batching (all messages of one
  ``batching_max_publish_delay_ms`` window go to one partition, so batches
  fill, as Java does); ``UseSinglePartition`` picks one partition at random
  once; a ``message_router(msg, n)`` function overrides both.

``send`` returns the MessageId once the broker stored the message;
``send_async`` returns an ``asyncio.Future`` as soon as the message is queued
(awaiting it waits for the receipt), so many sends are in flight at once.
``txn=`` (a :class:`magnetar.client.transaction.Transaction`) sends inside the
transaction: the partition is added to it first, the message is never batched,
and it becomes visible when the transaction commits.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from typing import Any

from magnetar.client.batching import OutgoingMessage
from magnetar.client.errors import AlreadyClosed, InvalidConfiguration
from magnetar.client.hashing import boost_hash, java_string_hash, murmur3_hash
from magnetar.client.producer_impl import PartitionProducer
from magnetar.client.schema import BytesSchema, Schema
from magnetar.client.transaction import check_transaction
from magnetar.client.types import HashingScheme, PartitionsRoutingMode
from magnetar.protocol.message_id import MessageId

log = logging.getLogger(__name__)


class Producer:
    def __init__(
        self,
        client: Any,
        topic: str,
        partitions: list[PartitionProducer],
        schema: Schema,
        routing_mode: PartitionsRoutingMode,
        hashing_scheme: HashingScheme,
        message_router: Callable[[Any, int], int] | None,
        batching_delay_ms: float,
        batching: bool,
    ) -> None:
        self._client = client
        self._topic = topic
        self._partitions = partitions
        self._schema = schema
        self._bytes_schema = type(schema) is BytesSchema
        self._routing_mode = routing_mode
        self._hash = {
            HashingScheme.BoostHash: boost_hash,
            HashingScheme.Murmur3_32Hash: murmur3_hash,
            HashingScheme.JavaStringHash: java_string_hash,
        }[hashing_scheme]
        self._router = message_router
        self._rr = client.rng.randint(0, max(0, len(partitions) - 1))
        self._single = self._rr
        self._window_ms = max(1.0, batching_delay_ms) if batching else 0.0
        self._closed = False
        self._update_task: asyncio.Task[None] | None = None
        if partitions[0].partition >= 0 and client.partitions_update_s > 0:
            self._update_task = asyncio.get_running_loop().create_task(self._partitions_loop())

    async def _partitions_loop(self) -> None:
        """Add producers for partitions added to the topic (Pulsar's autoUpdatePartitions)."""
        while not self._closed:
            await asyncio.sleep(self._client.partitions_update_s)
            try:
                n = await self._client.lookup.partitions(self._topic)
                first = self._partitions[0]
                for i in range(len(self._partitions), n):
                    p = PartitionProducer(self._client, f"{self._topic}-partition-{i}", i, first.conf)
                    await p.start()
                    self._partitions.append(p)
            except Exception as exc:
                log.warning("partition update of %s failed: %s", self._topic, exc)

    # ------------------------------------------------------------------ identity
    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._partitions[0].producer_name

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id_published for p in self._partitions)

    @property
    def num_partitions(self) -> int:
        return len(self._partitions) if self._partitions[0].partition >= 0 else 0

    # ------------------------------------------------------------------ routing
    def choose_partition(self, partition_key: str | None, ordering_key: bytes | None = None) -> int:
        n = len(self._partitions)
        if n == 1:
            return 0
        if self._router is not None:
            return self._router(partition_key, n) % n
        if partition_key is not None:
            return self._hash(partition_key) % n
        if ordering_key is not None:
            return self._hash(ordering_key) % n
        if self._routing_mode == PartitionsRoutingMode.UseSinglePartition:
            return self._single
        if self._window_ms:
            return (self._rr + int(time.monotonic() * 1000 / self._window_ms)) % n
        self._rr = (self._rr + 1) % n
        return self._rr

    # ------------------------------------------------------------------ sending
    async def send_async(
        self,
        content: Any,
        callback: Callable[[Any, Any], None] | None = None,
        *,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | bytes | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: float | None = None,
        txn: Any = None,
    ) -> asyncio.Future[MessageId]:
        """Queue a message; the returned future gives its MessageId (callback(err, id) too)."""
        if self._closed:
            raise AlreadyClosed(f"producer on {self._topic} is closed")
        key_b64 = False
        if self._schema.separated:  # KeyValue SEPARATED: the key goes in the message key, base64
            key, payload = self._schema.encode_separated(content)  # type: ignore[attr-defined]
            if key is not None:
                partition_key, key_b64 = base64.b64encode(key).decode(), True
        else:
            payload = (
                content if type(content) is bytes and self._bytes_schema else self._schema.encode(content)
            )
        if properties is not None:
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
                raise InvalidConfiguration("message properties must map str to str")
        if deliver_after is not None:
            if deliver_at is not None:
                raise InvalidConfiguration("give deliver_at or deliver_after, not both")
            seconds = (
                deliver_after.total_seconds() if hasattr(deliver_after, "total_seconds") else deliver_after
            )
            deliver_at = self._client.clock_ms() + int(seconds * 1000)
        if partition_key == "" and not key_b64:
            partition_key = None  # as the official client: an empty key is no key
        replicate_to = ["__local__"] if disable_replication else replication_clusters
        okey = ordering_key.encode() if isinstance(ordering_key, str) else ordering_key
        fut: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        msg = OutgoingMessage(
            payload,
            fut,
            sequence_id if sequence_id is not None else -1,
            properties or None,
            partition_key,
            okey,
            event_timestamp or None,
            deliver_at,
            replicate_to,
            callback=callback,
            partition_key_b64=key_b64,
        )
        child = self._partitions[self.choose_partition(partition_key, okey)]
        if txn is not None:  # client.transaction: register the partition, then send with the id
            check_transaction(txn)
            await txn.register_produced_topic(child.topic)
            msg.txnid = txn.txn_id
            txn.track_send(fut)
        await child.enqueue(msg)
        return fut

    async def send(self, content: Any, **kwargs: Any) -> MessageId:
        """Send and wait until the broker stored it; returns the MessageId."""
        fut = await self.send_async(content, **kwargs)
        return await fut

    async def flush(self) -> None:
        await asyncio.gather(*(p.flush() for p in self._partitions))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._update_task is not None:
            self._update_task.cancel()
        await asyncio.gather(*(p.close() for p in self._partitions), return_exceptions=True)
        self._client._forget(self)

    def is_connected(self) -> bool:
        return all(p._ready for p in self._partitions)

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


DEFAULT_SCHEMA = BytesSchema()
