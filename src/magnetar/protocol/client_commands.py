"""Builders for the commands a client sends; each returns the encoded frame bytes.

Theory of operation: as in ``server_commands``, required proto2 fields are
positional parameters and optional ones keyword arguments left absent when
None. The defaults mirror what the C++ client puts on the wire (section 6.1 and
8.1 of pulsar-protocol.md): e.g. LOOKUP always carries
``advertised_listener_name`` ("" when none), and CONNECT always carries
``auth_method_name``. ``send()`` puts a CommandSend in front of
headers-and-payload built by ``payload.build_headers_and_payload``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from magnetar.protocol.enums import (
    MAX_PROTOCOL_VERSION,
    AckType,
    CommandType,
    InitialPosition,
    KeySharedMode,
    ProducerAccessMode,
    SubType,
    TopicDomainMode,
    TxnAction,
    ValidationError,
)
from magnetar.protocol.frames import (
    encode_command,
    frame_from_base,
    new_base_command,
    payload_frame_from_base,
)
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.wire import (
    WireSchema,
    fill_feature_flags,
    fill_key_values,
    fill_message_id,
    fill_schema,
    set_present,
    u64,
)

CLIENT_VERSION = "Pulsar-Magnetar-v0.1.0"


def connect(
    client_version: str = CLIENT_VERSION,
    protocol_version: int = MAX_PROTOCOL_VERSION,
    auth_method_name: str = "none",
    auth_data: bytes | None = None,
    *,
    proxy_to_broker_url: str | None = None,
    original_principal: str | None = None,
    original_auth_data: str | None = None,
    original_auth_method: str | None = None,
    supports_auth_refresh: bool | None = True,
    supports_broker_entry_metadata: bool | None = True,
    supports_partial_producer: bool | None = None,
    supports_topic_watchers: bool | None = None,
) -> bytes:
    base, cmd = new_base_command(CommandType.CONNECT)
    cmd.client_version = client_version
    cmd.protocol_version = protocol_version
    cmd.auth_method_name = auth_method_name
    if auth_data is not None:
        cmd.auth_data = auth_data
    set_present(
        cmd,
        proxy_to_broker_url=proxy_to_broker_url,
        original_principal=original_principal,
        original_auth_data=original_auth_data,
        original_auth_method=original_auth_method,
    )
    fill_feature_flags(
        cmd,
        supports_auth_refresh=supports_auth_refresh,
        supports_broker_entry_metadata=supports_broker_entry_metadata,
        supports_partial_producer=supports_partial_producer,
        supports_topic_watchers=supports_topic_watchers,
    )
    return frame_from_base(base)


def auth_response(
    client_version: str, auth_method_name: str, auth_data: bytes, protocol_version: int | None = None
) -> bytes:
    base, cmd = new_base_command(CommandType.AUTH_RESPONSE)
    cmd.client_version = client_version
    cmd.response.auth_method_name = auth_method_name
    cmd.response.auth_data = auth_data
    if protocol_version is not None:
        cmd.protocol_version = protocol_version
    return frame_from_base(base)


def partitioned_metadata(
    topic: str, request_id: int, metadata_auto_creation_enabled: bool | None = None
) -> bytes:
    return encode_command(
        CommandType.PARTITIONED_METADATA,
        topic=topic,
        request_id=u64(request_id),
        metadata_auto_creation_enabled=metadata_auto_creation_enabled,
    )


def lookup(
    topic: str, request_id: int, authoritative: bool = False, advertised_listener_name: str = ""
) -> bytes:
    return encode_command(
        CommandType.LOOKUP,
        topic=topic,
        request_id=u64(request_id),
        authoritative=authoritative,
        advertised_listener_name=advertised_listener_name,
    )


def producer(
    topic: str,
    producer_id: int,
    request_id: int,
    producer_name: str | None = None,
    *,
    encrypted: bool = False,
    metadata: dict[str, str] | None = None,
    schema: WireSchema | None = None,
    epoch: int = 0,
    user_provided_producer_name: bool | None = None,
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
    topic_epoch: int | None = None,
    txn_enabled: bool | None = None,
    initial_subscription_name: str | None = None,
) -> bytes:
    base, cmd = new_base_command(CommandType.PRODUCER)
    cmd.topic = topic
    cmd.producer_id = producer_id
    cmd.request_id = u64(request_id)
    if producer_name is not None:
        cmd.producer_name = producer_name
    cmd.encrypted = encrypted
    fill_key_values(cmd.metadata, metadata)
    if schema is not None:
        fill_schema(cmd.schema, schema)
    cmd.epoch = epoch
    cmd.user_provided_producer_name = (
        user_provided_producer_name if user_provided_producer_name is not None else producer_name is not None
    )
    cmd.producer_access_mode = int(access_mode)
    if topic_epoch is not None:
        cmd.topic_epoch = topic_epoch
    if txn_enabled is not None:
        cmd.txn_enabled = txn_enabled
    if initial_subscription_name is not None:
        cmd.initial_subscription_name = initial_subscription_name
    return frame_from_base(base)


def send(
    producer_id: int,
    sequence_id: int,
    headers_and_payload: bytes | bytearray | memoryview,
    num_messages: int | None = None,
    *,
    highest_sequence_id: int | None = None,
    is_chunk: bool | None = None,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
    marker: bool | None = None,
    message_id: MessageId | None = None,
) -> bytes:
    """A SEND frame; pass ``num_messages`` for batches (cpp sends it even for a batch of 1)."""
    base, cmd = new_base_command(CommandType.SEND)
    cmd.producer_id = producer_id
    cmd.sequence_id = sequence_id
    if num_messages is not None:
        cmd.num_messages = num_messages
    set_present(
        cmd,
        highest_sequence_id=highest_sequence_id,
        is_chunk=is_chunk,
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        marker=marker,
    )
    if message_id is not None:
        fill_message_id(cmd.message_id, message_id)
    return payload_frame_from_base(base, headers_and_payload)


@dataclass(frozen=True, slots=True)
class KeySharedPolicy:
    mode: KeySharedMode = KeySharedMode.AUTO_SPLIT
    hash_ranges: tuple[tuple[int, int], ...] = ()  # inclusive (start, end) within [0, 65535]
    allow_out_of_order_delivery: bool = False


def subscribe(
    topic: str,
    subscription: str,
    sub_type: SubType,
    consumer_id: int,
    request_id: int,
    consumer_name: str = "",
    *,
    priority_level: int = 0,
    durable: bool = True,
    start_message_id: MessageId | None = None,
    metadata: dict[str, str] | None = None,
    read_compacted: bool = False,
    schema: WireSchema | None = None,
    initial_position: InitialPosition = InitialPosition.Latest,
    replicate_subscription_state: bool = False,
    force_topic_creation: bool | None = None,
    start_message_rollback_duration_sec: int | None = None,
    key_shared: KeySharedPolicy | None = None,
    subscription_properties: dict[str, str] | None = None,
    consumer_epoch: int | None = None,
) -> bytes:
    base, cmd = new_base_command(CommandType.SUBSCRIBE)
    cmd.topic = topic
    cmd.subscription = subscription
    cmd.subType = int(sub_type)
    cmd.consumer_id = consumer_id
    cmd.request_id = u64(request_id)
    cmd.consumer_name = consumer_name
    cmd.priority_level = priority_level
    cmd.durable = durable
    if start_message_id is not None:
        fill_message_id(cmd.start_message_id, start_message_id)
    fill_key_values(cmd.metadata, metadata)
    cmd.read_compacted = read_compacted
    if schema is not None:
        fill_schema(cmd.schema, schema)
    cmd.initialPosition = int(initial_position)
    cmd.replicate_subscription_state = replicate_subscription_state
    if force_topic_creation is not None:
        cmd.force_topic_creation = force_topic_creation
    if start_message_rollback_duration_sec is not None:
        cmd.start_message_rollback_duration_sec = start_message_rollback_duration_sec
    if key_shared is not None:
        meta = cmd.keySharedMeta
        meta.keySharedMode = int(key_shared.mode)
        for start, end in key_shared.hash_ranges:
            r = meta.hashRanges.add()
            r.start = start
            r.end = end
        if key_shared.allow_out_of_order_delivery:
            meta.allowOutOfOrderDelivery = True
    fill_key_values(cmd.subscription_properties, subscription_properties)
    if consumer_epoch is not None:
        cmd.consumer_epoch = consumer_epoch
    return frame_from_base(base)


def flow(consumer_id: int, message_permits: int) -> bytes:
    return encode_command(CommandType.FLOW, consumer_id=consumer_id, messagePermits=message_permits)


def ack(
    consumer_id: int,
    ack_type: AckType,
    message_ids: Sequence[MessageId],
    *,
    validation_error: ValidationError | None = None,
    properties: dict[str, int] | None = None,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
    request_id: int | None = None,
) -> bytes:
    """ACK; like cpp, ids carry ledger, entry and the ack_set only (no batch index/partition)."""
    base, cmd = new_base_command(CommandType.ACK)
    cmd.consumer_id = consumer_id
    cmd.ack_type = int(ack_type)
    for mid in message_ids:
        data = cmd.message_id.add()
        data.ledgerId = u64(mid.ledger_id)
        data.entryId = u64(mid.entry_id)
        if mid.ack_set:
            data.ack_set.extend(mid.ack_set)
            if txnid_most_bits is not None and mid.batch_size > 0:
                data.batch_size = mid.batch_size  # a transaction's batch-index ack: the broker needs the size
    if validation_error is not None:
        cmd.validation_error = int(validation_error)
    fill_key_values(cmd.properties, properties)
    if txnid_least_bits is not None:
        cmd.txnid_least_bits = txnid_least_bits
    if txnid_most_bits is not None:
        cmd.txnid_most_bits = txnid_most_bits
    if request_id is not None:
        cmd.request_id = u64(request_id)
    return frame_from_base(base)


def unsubscribe(consumer_id: int, request_id: int, force: bool | None = None) -> bytes:
    return encode_command(
        CommandType.UNSUBSCRIBE, consumer_id=consumer_id, request_id=u64(request_id), force=force
    )


def redeliver_unacknowledged(
    consumer_id: int, message_ids: Sequence[MessageId] = (), consumer_epoch: int | None = None
) -> bytes:
    """No ids = redeliver everything un-acked (what cpp sends for Exclusive/Failover)."""
    base, cmd = new_base_command(CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES)
    cmd.consumer_id = consumer_id
    for mid in message_ids:
        fill_message_id(cmd.message_ids.add(), MessageId(mid.ledger_id, mid.entry_id))
    if consumer_epoch is not None:
        cmd.consumer_epoch = consumer_epoch
    return frame_from_base(base)


def seek(
    consumer_id: int,
    request_id: int,
    message_id: MessageId | None = None,
    message_publish_time: int | None = None,
) -> bytes:
    base, cmd = new_base_command(CommandType.SEEK)
    cmd.consumer_id = consumer_id
    cmd.request_id = u64(request_id)
    if message_id is not None:
        fill_message_id(cmd.message_id, MessageId(message_id.ledger_id, message_id.entry_id))
    if message_publish_time is not None:
        cmd.message_publish_time = message_publish_time
    return frame_from_base(base)


def get_last_message_id(consumer_id: int, request_id: int) -> bytes:
    return encode_command(
        CommandType.GET_LAST_MESSAGE_ID, consumer_id=consumer_id, request_id=u64(request_id)
    )


def get_topics_of_namespace(
    request_id: int,
    namespace: str,
    mode: TopicDomainMode = TopicDomainMode.PERSISTENT,
    topics_pattern: str | None = None,
    topics_hash: str | None = None,
) -> bytes:
    return encode_command(
        CommandType.GET_TOPICS_OF_NAMESPACE,
        request_id=u64(request_id),
        namespace=namespace,
        mode=int(mode),
        topics_pattern=topics_pattern,
        topics_hash=topics_hash,
    )


def get_schema(request_id: int, topic: str, schema_version: bytes | None = None) -> bytes:
    return encode_command(
        CommandType.GET_SCHEMA, request_id=u64(request_id), topic=topic, schema_version=schema_version
    )


def get_or_create_schema(request_id: int, topic: str, schema: WireSchema) -> bytes:
    base, cmd = new_base_command(CommandType.GET_OR_CREATE_SCHEMA)
    cmd.request_id = u64(request_id)
    cmd.topic = topic
    fill_schema(cmd.schema, schema)
    return frame_from_base(base)


def consumer_stats(request_id: int, consumer_id: int) -> bytes:
    return encode_command(CommandType.CONSUMER_STATS, request_id=u64(request_id), consumer_id=consumer_id)


def watch_topic_list(
    request_id: int, watcher_id: int, namespace: str, topics_pattern: str, topics_hash: str | None = None
) -> bytes:
    return encode_command(
        CommandType.WATCH_TOPIC_LIST,
        request_id=u64(request_id),
        watcher_id=watcher_id,
        namespace=namespace,
        topics_pattern=topics_pattern,
        topics_hash=topics_hash,
    )


def watch_topic_list_close(request_id: int, watcher_id: int) -> bytes:
    return encode_command(
        CommandType.WATCH_TOPIC_LIST_CLOSE, request_id=u64(request_id), watcher_id=watcher_id
    )


def tc_client_connect_request(request_id: int, tc_id: int) -> bytes:
    return encode_command(CommandType.TC_CLIENT_CONNECT_REQUEST, request_id=u64(request_id), tc_id=tc_id)


def new_txn(request_id: int, txn_ttl_ms: int | None = None, tc_id: int | None = None) -> bytes:
    """NEW_TXN; the v20 field is called txn_ttl_seconds but holds milliseconds."""
    return encode_command(
        CommandType.NEW_TXN, request_id=u64(request_id), txn_ttl_seconds=txn_ttl_ms, tc_id=tc_id
    )


def add_partition_to_txn(
    request_id: int, txnid_least_bits: int, txnid_most_bits: int, partitions: Iterable[str]
):
    return encode_command(
        CommandType.ADD_PARTITION_TO_TXN,
        request_id=u64(request_id),
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        partitions=list(partitions),
    )


def add_subscription_to_txn(
    request_id: int, txnid_least_bits: int, txnid_most_bits: int, subscriptions: Iterable[tuple[str, str]]
) -> bytes:
    return encode_command(
        CommandType.ADD_SUBSCRIPTION_TO_TXN,
        request_id=u64(request_id),
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        subscription=[{"topic": t, "subscription": s} for t, s in subscriptions],
    )


def end_txn(request_id: int, txnid_least_bits: int, txnid_most_bits: int, txn_action: TxnAction) -> bytes:
    return encode_command(
        CommandType.END_TXN,
        request_id=u64(request_id),
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        txn_action=int(txn_action),
    )


def end_txn_on_partition(
    request_id: int, txnid_least_bits: int, txnid_most_bits: int, topic: str, txn_action: TxnAction
) -> bytes:
    return encode_command(
        CommandType.END_TXN_ON_PARTITION,
        request_id=u64(request_id),
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        topic=topic,
        txn_action=int(txn_action),
    )


def end_txn_on_subscription(
    request_id: int,
    txnid_least_bits: int,
    txnid_most_bits: int,
    topic: str,
    subscription: str,
    txn_action: TxnAction,
) -> bytes:
    return encode_command(
        CommandType.END_TXN_ON_SUBSCRIPTION,
        request_id=u64(request_id),
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        subscription={"topic": topic, "subscription": subscription},
        txn_action=int(txn_action),
    )
