"""Subscribing: ``Client.subscribe``, ``create_reader`` and ``create_table_view`` (a part of ``Client``).

Theory of operation: these methods turn the official client's keyword
arguments into a ``ConsumerConf`` and a :class:`Consumer` over one topic, a
list of topics, or a regex (``pattern.PatternDiscovery`` keeps a regex
consumer's topics current). A reader is a non-durable Exclusive consumer
whose subscription starts at its start message id (``Reader`` handles the
inclusive start and, for partitioned topics, the start in each partition).
The class is a mixin of :class:`~magnetar.client.client.Client`, which owns
the lookup, the pool and the handles; it lives apart so each module keeps to
one purpose.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from magnetar.client.acks import MultiplierRedeliveryBackoff
from magnetar.client.consumer import Consumer
from magnetar.client.consumer_conf import ConsumerConf
from magnetar.client.errors import InvalidConfiguration, NotSupported
from magnetar.client.pattern import PatternDiscovery, matching_topics, pattern_namespace
from magnetar.client.reader import Reader
from magnetar.client.schema import AvroSchema, BytesSchema, Schema
from magnetar.client.schema_auto import AutoConsumeSchema, SchemaResolver
from magnetar.client.tableview import TableView
from magnetar.client.types import (
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    RegexSubscriptionMode,
    coerce,
)
from magnetar.common.naming import TopicName
from magnetar.protocol.client_commands import KeySharedPolicy
from magnetar.protocol.enums import KeySharedMode, SubType
from magnetar.protocol.message_id import EARLIEST, LATEST, MessageId


def reject(**unsupported: Any) -> None:
    """``NotSupported`` for an option this client does not implement, rather than ignoring it."""
    for name, value in unsupported.items():
        if value not in (None, False):
            raise NotSupported(f"{name} is not implemented in magnetar.client yet")


class Subscribing:
    lookup: Any
    _handles: list[Any]

    def _check(self) -> None:
        raise NotImplementedError

    async def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: Any = ConsumerType.Exclusive,
        schema: Schema | None = None,
        receiver_queue_size: int = 1000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        negative_ack_redelivery_delay_ms: int = 60_000,
        negative_ack_redelivery_backoff: MultiplierRedeliveryBackoff | None = None,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: float = 60,
        initial_position: Any = InitialPosition.Latest,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: Any = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        subscription_properties: dict[str, str] | None = None,
        retry_enable: bool = False,
        message_listener: Any = None,
        crypto_key_reader: Any = None,
        acknowledgment_group_time_ms: float = 100,
    ) -> Consumer:
        self._check()
        reject(message_listener=message_listener, crypto_key_reader=crypto_key_reader)
        if not subscription_name:
            raise InvalidConfiguration("subscription_name is required")
        if receiver_queue_size < 0:
            raise InvalidConfiguration("receiver_queue_size must be >= 0")
        ks = None
        if key_shared_policy is not None:
            mode = key_shared_policy.key_shared_mode
            ks = KeySharedPolicy(
                KeySharedMode.STICKY
                if str(getattr(mode, "name", mode)).lower() == "sticky"
                else KeySharedMode.AUTO_SPLIT,
                tuple(key_shared_policy.sticky_ranges),
                key_shared_policy.allow_out_of_order_delivery,
            )
        conf = ConsumerConf(
            subscription=subscription_name,
            sub_type=SubType(int(coerce(ConsumerType, consumer_type))),
            consumer_name=consumer_name or uuid.uuid4().hex[:10],
            receiver_queue_size=receiver_queue_size,
            initial_position=coerce(InitialPosition, initial_position),
            read_compacted=is_read_compacted,
            properties=properties,
            subscription_properties=subscription_properties,
            ack_group_time_ms=acknowledgment_group_time_ms,
            batch_index_ack_enabled=batch_index_ack_enabled,
            negative_ack_delay_ms=negative_ack_redelivery_delay_ms,
            negative_ack_backoff=negative_ack_redelivery_backoff,
            ack_timeout_ms=unacked_messages_timeout_ms or 0,
            max_redeliver_count=dead_letter_policy.max_redeliver_count if dead_letter_policy else 0,
            dead_letter_topic=dead_letter_policy.dead_letter_topic if dead_letter_policy else None,
            dlq_initial_subscription=dead_letter_policy.initial_subscription_name
            if dead_letter_policy
            else None,
            replicate_subscription_state=replicate_subscription_state_enabled,
            key_shared=ks,
            max_pending_chunked_messages=max_pending_chunked_message,
        )
        schema = schema or BytesSchema()
        conf.schema = schema.wire_schema()
        consumer = Consumer(
            self, subscription_name, conf, schema if not isinstance(schema, BytesSchema) else None
        )
        if isinstance(schema, AutoConsumeSchema | AvroSchema):
            consumer._resolver = SchemaResolver(self, schema)
        try:
            if isinstance(topic, re.Pattern):
                namespace, mode = pattern_namespace(topic, regex_subscription_mode)
                for t in await matching_topics(self.lookup, topic, namespace, mode):
                    await consumer.add_topic(t)
                consumer.discovery = PatternDiscovery(
                    consumer, topic, namespace, mode, float(pattern_auto_discovery_period)
                )
                await consumer.discovery.start()
            else:
                names = [str(TopicName.get(t)) for t in ([topic] if isinstance(topic, str) else list(topic))]
                if retry_enable:
                    policy = dead_letter_policy.retry_letter_topic if dead_letter_policy else None
                    consumer.retry_topic = policy or f"{names[0]}-{subscription_name}-RETRY"
                    names.append(str(TopicName.get(consumer.retry_topic)))
                for t in names:
                    await consumer.add_topic(t)
        except BaseException:
            await consumer.close()
            raise
        self._handles.append(consumer)
        return consumer

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId | str,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        start_message_id_inclusive: bool = False,
        schema: Schema | None = None,
        reader_listener: Any = None,
        crypto_key_reader: Any = None,
    ) -> Reader:
        self._check()
        reject(reader_listener=reader_listener, crypto_key_reader=crypto_key_reader)
        if isinstance(start_message_id, str):
            named = {"earliest": EARLIEST, "latest": LATEST}.get(start_message_id.lower())
            if named is None:
                raise InvalidConfiguration("start_message_id must be a MessageId, 'earliest' or 'latest'")
            start_message_id = named
        sub = reader_name or f"{subscription_role_prefix or 'reader'}-{uuid.uuid4().hex[:10]}"
        conf = ConsumerConf(
            subscription=sub,
            sub_type=SubType.Exclusive,
            receiver_queue_size=receiver_queue_size,
            durable=False,
            start_message_id=start_message_id,
            start_inclusive=start_message_id_inclusive,
            read_compacted=is_read_compacted,
            initial_position=InitialPosition.Earliest
            if start_message_id == EARLIEST
            else InitialPosition.Latest,
        )
        schema = schema or BytesSchema()
        conf.schema = schema.wire_schema()
        consumer = Consumer(self, sub, conf, schema if not isinstance(schema, BytesSchema) else None)
        if isinstance(schema, AutoConsumeSchema | AvroSchema):
            consumer._resolver = SchemaResolver(self, schema)
        try:
            await consumer.add_topic(str(TopicName.get(topic)))
            reader = Reader(consumer, start_message_id, start_message_id_inclusive)
            await reader._position_latest_inclusive()
        except BaseException:
            await consumer.close()
            raise
        self._handles.append(consumer)
        return reader

    async def create_table_view(
        self, topic: str, subscription_name: str | None = None, schema: Schema | None = None
    ) -> TableView:
        """A TableView of ``topic`` (read_compacted reader from EARLIEST), caught up before it returns."""
        reader = await self.create_reader(
            topic, EARLIEST, reader_name=subscription_name, is_read_compacted=True, schema=schema
        )
        view = TableView(reader)
        try:
            await view._catch_up()
        except BaseException:
            await reader.close()
            raise
        return view
