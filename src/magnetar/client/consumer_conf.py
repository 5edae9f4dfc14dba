"""A consumer's settings, as one dataclass shared by every partition consumer of a subscription.

Theory of operation: ``Client.subscribe`` / ``create_reader`` (``subscribing``)
turn the official client's keyword arguments into one :class:`ConsumerConf`
(enums already resolved, policies already built); the application-level
``Consumer`` and each of its ``PartitionConsumer`` children read it and never
change it, so partitions added later subscribe exactly like the first ones.
``receiver_queue_size=0`` makes a zero-queue consumer; ``durable=False`` with
``start_message_id`` is a reader; ``max_redeliver_count > 0`` turns on the
dead-letter topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from magnetar.protocol.client_commands import KeySharedPolicy
from magnetar.protocol.enums import InitialPosition, SubType
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.wire import WireSchema


@dataclass
class ConsumerConf:
    subscription: str
    sub_type: SubType = SubType.Exclusive
    consumer_name: str = ""
    receiver_queue_size: int = 1000
    initial_position: InitialPosition = InitialPosition.Latest
    durable: bool = True
    start_message_id: MessageId | None = None
    start_inclusive: bool = False
    read_compacted: bool = False
    properties: dict[str, str] | None = None
    subscription_properties: dict[str, str] | None = None
    schema: WireSchema | None = None
    ack_group_time_ms: float = 100.0
    batch_index_ack_enabled: bool = False
    negative_ack_delay_ms: float = 60_000.0
    negative_ack_backoff: Any = None  # acks.MultiplierRedeliveryBackoff
    ack_timeout_ms: float = 0.0
    max_redeliver_count: int = 0  # 0: no dead-letter topic
    dead_letter_topic: str | None = None
    dlq_initial_subscription: str | None = None
    replicate_subscription_state: bool = False
    key_shared: KeySharedPolicy | None = None
    priority_level: int = 0
    max_pending_chunked_messages: int = 10
    expire_incomplete_chunks_ms: int = 60_000
    extra: dict[str, Any] = field(default_factory=dict)
