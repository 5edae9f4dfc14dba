"""Builders for the commands a broker sends; each returns the encoded frame bytes.

Theory of operation: one function per command. Every proto2 *required* field
is a positional parameter, so a builder cannot produce a frame the C++ client
would fail to parse (pulsar-protocol.md section 14); optional fields are
keyword arguments and stay absent when None. ``message()`` is the dispatch
hot path: a new CommandMessage in front of the stored headers-and-payload
bytes, which are never re-serialized.

Do not send REACHED_END_OF_TOPIC, transaction responses, WATCH_TOPIC_* or
GET_OR_CREATE_SCHEMA_RESPONSE to a ``Pulsar-CPP-v4.2.0`` client: it closes
the connection on them. The builders exist for other peers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from magnetar.protocol.enums import (
    CommandType,
    LookupType,
    PartitionedMetadataResult,
    ResourceType,
    ServerError,
)
from magnetar.protocol.frames import encode_command, frame_from_base, new_base_command
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.wire import WireSchema, fill_feature_flags, fill_message_id, fill_schema, u64

_U32_PAIR = struct.Struct(">II")


def connected(
    server_version: str,
    protocol_version: int,
    max_message_size: int | None = None,
    *,
    supports_topic_watchers: bool | None = None,
    supports_get_partitioned_metadata_without_auto_creation: bool | None = None,
    supports_auth_refresh: bool | None = None,
    supports_broker_entry_metadata: bool | None = None,
) -> bytes:
    base, cmd = new_base_command(CommandType.CONNECTED)
    cmd.server_version = server_version
    cmd.protocol_version = protocol_version
    if max_message_size is not None:
        cmd.max_message_size = max_message_size
    fill_feature_flags(
        cmd,
        supports_topic_watchers=supports_topic_watchers,
        supports_get_partitioned_metadata_without_auto_creation=(
            supports_get_partitioned_metadata_without_auto_creation
        ),
        supports_auth_refresh=supports_auth_refresh,
        supports_broker_entry_metadata=supports_broker_entry_metadata,
    )
    return frame_from_base(base)


def auth_challenge(
    server_version: str, auth_method_name: str, challenge: bytes, protocol_version: int | None = None
) -> bytes:
    base, cmd = new_base_command(CommandType.AUTH_CHALLENGE)
    cmd.server_version = server_version
    cmd.challenge.auth_method_name = auth_method_name
    cmd.challenge.auth_data = challenge
    if protocol_version is not None:
        cmd.protocol_version = protocol_version
    return frame_from_base(base)


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int = -1,
    schema_version: bytes = b"",
    topic_epoch: int | None = None,
    producer_ready: bool = True,
) -> bytes:
    base, cmd = new_base_command(CommandType.PRODUCER_SUCCESS)
    cmd.request_id = u64(request_id)
    cmd.producer_name = producer_name
    cmd.last_sequence_id = last_sequence_id
    if schema_version:
        cmd.schema_version = schema_version
    if topic_epoch is not None:
        cmd.topic_epoch = topic_epoch
    if not producer_ready:
        cmd.producer_ready = False
    return frame_from_base(base)


def send_receipt(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    highest_sequence_id: int | None = None,
    partition: int = -1,
) -> bytes:
    """A SEND_RECEIPT frame, encoded by hand (the publish hot path: one per SEND): the bytes
    protobuf writes for the same fields (in number order, defaults absent; tests/unit/protocol
    compare the two over every field combination)."""
    mid = b"\x08" + _varint(ledger_id) + b"\x10" + _varint(entry_id)
    if partition != -1:
        mid += b"\x18" + _varint(partition)
    cmd = b"\x08" + _varint(producer_id) + b"\x10" + _varint(sequence_id) + b"\x1a" + _varint(len(mid)) + mid
    if highest_sequence_id is not None:
        cmd += b"\x20" + _varint(highest_sequence_id)
    # BaseCommand: type (1) = SEND_RECEIPT (7), send_receipt (7) = cmd
    body = b"\x08\x07\x3a" + _varint(len(cmd)) + cmd
    return _U32_PAIR.pack(len(body) + 4, len(body)) + body


def send_error(producer_id: int, sequence_id: int, error: ServerError | int, message: str) -> bytes:
    """Only ChecksumError is "soft" for cpp 4.2.0; any other code makes it close the connection."""
    return encode_command(
        CommandType.SEND_ERROR,
        producer_id=producer_id,
        sequence_id=sequence_id,
        error=int(error),
        message=message,
    )


def error(request_id: int, error: ServerError | int, message: str) -> bytes:
    """CommandError: all three fields are required (an empty message is fine, none is not)."""
    return encode_command(CommandType.ERROR, request_id=u64(request_id), error=int(error), message=message)


def success(request_id: int, schema: WireSchema | None = None) -> bytes:
    base, cmd = new_base_command(CommandType.SUCCESS)
    cmd.request_id = u64(request_id)
    if schema is not None:
        fill_schema(cmd.schema, schema)
    return frame_from_base(base)


def _varint(n: int) -> bytes:
    """Protobuf base-128 varint; a negative int32/int64 as its 64-bit two's complement."""
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:  # entry ids, sizes: two bytes without the loop
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def message_command_bytes(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int = -1,
    redelivery_count: int = 0,
    ack_set: Sequence[int] | None = None,
    consumer_epoch: int | None = None,
) -> bytes:
    """The serialized BaseCommand of a MESSAGE (without sizes or payload).

    Encoded by hand (the dispatch hot path: one per message sent): the same bytes protobuf
    writes (fields in number order; tests/unit/protocol compare the two), at a fraction of
    the cost of building and serializing message objects."""
    mid = b"\x08" + _varint(ledger_id) + b"\x10" + _varint(entry_id)
    if partition != -1:
        mid += b"\x18" + _varint(partition)
    cmd = b"\x08" + _varint(consumer_id) + b"\x12" + _varint(len(mid)) + mid
    if redelivery_count:
        cmd += b"\x18" + _varint(redelivery_count)
    if ack_set:
        cmd += b"".join(b"\x20" + _varint(w) for w in ack_set)
    if consumer_epoch is not None:
        cmd += b"\x28" + _varint(consumer_epoch)
    # BaseCommand: type (1) = MESSAGE, message (9) = cmd
    return b"\x08\x09\x4a" + _varint(len(cmd)) + cmd


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    headers_and_payload: bytes | bytearray | memoryview,
    redelivery_count: int = 0,
    ack_set: Sequence[int] | None = None,
    consumer_epoch: int | None = None,
) -> bytes:
    """A MESSAGE frame: sizes, a new CommandMessage, then the stored bytes unchanged."""
    cmd = message_command_bytes(
        consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, consumer_epoch
    )
    return b"".join(
        (_U32_PAIR.pack(len(cmd) + 4 + len(headers_and_payload), len(cmd)), cmd, headers_and_payload)
    )


def lookup_response(
    request_id: int,
    response: LookupType | int,
    broker_service_url: str | None = None,
    broker_service_url_tls: str | None = None,
    authoritative: bool = False,
    proxy_through_service_url: bool = False,
    error: ServerError | int | None = None,
    message: str | None = None,
) -> bytes:
    """LOOKUP_RESPONSE; ``response`` is always set (cpp treats its absence as failure)."""
    base, cmd = new_base_command(CommandType.LOOKUP_RESPONSE)
    cmd.request_id = u64(request_id)
    cmd.response = int(response)
    if broker_service_url is not None:
        cmd.brokerServiceUrl = broker_service_url
    if broker_service_url_tls is not None:
        cmd.brokerServiceUrlTls = broker_service_url_tls
    if authoritative:
        cmd.authoritative = True
    if proxy_through_service_url:
        cmd.proxy_through_service_url = True
    if error is not None:
        cmd.error = int(error)
    if message is not None:
        cmd.message = message
    return frame_from_base(base)


def lookup_failed(request_id: int, error: ServerError | int, message: str) -> bytes:
    return lookup_response(request_id, LookupType.Failed, error=error, message=message)


def partitioned_metadata_response(
    request_id: int,
    partitions: int | None = None,
    error: ServerError | int | None = None,
    message: str | None = None,
) -> bytes:
    """Success with ``partitions`` (0 = not partitioned) or Failed with error and message."""
    base, cmd = new_base_command(CommandType.PARTITIONED_METADATA_RESPONSE)
    cmd.request_id = u64(request_id)
    if error is None:
        cmd.response = PartitionedMetadataResult.Success
        cmd.partitions = partitions or 0
    else:
        cmd.response = PartitionedMetadataResult.Failed
        cmd.error = int(error)
        cmd.message = message or ""
    return frame_from_base(base)


def get_last_message_id_response(
    request_id: int, last_message_id: MessageId, consumer_mark_delete_position: MessageId | None = None
) -> bytes:
    base, cmd = new_base_command(CommandType.GET_LAST_MESSAGE_ID_RESPONSE)
    cmd.request_id = u64(request_id)
    fill_message_id(cmd.last_message_id, last_message_id)
    if consumer_mark_delete_position is not None:
        fill_message_id(cmd.consumer_mark_delete_position, consumer_mark_delete_position)
    return frame_from_base(base)


def active_consumer_change(consumer_id: int, is_active: bool) -> bytes:
    return encode_command(CommandType.ACTIVE_CONSUMER_CHANGE, consumer_id=consumer_id, is_active=is_active)


def close_producer(
    producer_id: int,
    request_id: int = -1,
    assigned_broker_service_url: str | None = None,
    assigned_broker_service_url_tls: str | None = None,
) -> bytes:
    """CLOSE_PRODUCER (either direction); the broker sends request_id -1."""
    return encode_command(
        CommandType.CLOSE_PRODUCER,
        producer_id=producer_id,
        request_id=u64(request_id),
        assignedBrokerServiceUrl=assigned_broker_service_url,
        assignedBrokerServiceUrlTls=assigned_broker_service_url_tls,
    )


def close_consumer(
    consumer_id: int,
    request_id: int = -1,
    assigned_broker_service_url: str | None = None,
    assigned_broker_service_url_tls: str | None = None,
) -> bytes:
    return encode_command(
        CommandType.CLOSE_CONSUMER,
        consumer_id=consumer_id,
        request_id=u64(request_id),
        assignedBrokerServiceUrl=assigned_broker_service_url,
        assignedBrokerServiceUrlTls=assigned_broker_service_url_tls,
    )


_PING = encode_command(CommandType.PING)
_PONG = encode_command(CommandType.PONG)


def ping() -> bytes:
    return _PING


def pong() -> bytes:
    return _PONG


def get_topics_of_namespace_response(
    request_id: int,
    topics: Iterable[str],
    filtered: bool | None = None,
    topics_hash: str | None = None,
    changed: bool | None = None,
) -> bytes:
    return encode_command(
        CommandType.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        request_id=u64(request_id),
        topics=list(topics),
        filtered=filtered,
        topics_hash=topics_hash,
        changed=changed,
    )


def get_schema_response(
    request_id: int,
    schema: WireSchema | None = None,
    schema_version: bytes | None = None,
    error_code: ServerError | int | None = None,
    error_message: str | None = None,
) -> bytes:
    """Success form (schema + schema_version) or error form (error_code + error_message)."""
    base, cmd = new_base_command(CommandType.GET_SCHEMA_RESPONSE)
    cmd.request_id = u64(request_id)
    if schema is not None:
        fill_schema(cmd.schema, schema)
    if schema_version is not None:
        cmd.schema_version = schema_version
    if error_code is not None:
        cmd.error_code = int(error_code)
        cmd.error_message = error_message or ""
    return frame_from_base(base)


def get_or_create_schema_response(
    request_id: int,
    schema_version: bytes | None = None,
    error_code: ServerError | int | None = None,
    error_message: str | None = None,
) -> bytes:
    return encode_command(
        CommandType.GET_OR_CREATE_SCHEMA_RESPONSE,
        request_id=u64(request_id),
        schema_version=schema_version,
        error_code=None if error_code is None else int(error_code),
        error_message=error_message,
    )


def ack_response(
    consumer_id: int,
    request_id: int,
    error: ServerError | int | None = None,
    message: str | None = None,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
) -> bytes:
    return encode_command(
        CommandType.ACK_RESPONSE,
        consumer_id=consumer_id,
        request_id=u64(request_id),
        error=None if error is None else int(error),
        message=message,
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
    )


def reached_end_of_topic(consumer_id: int) -> bytes:
    """Never send this to a Pulsar-CPP-v4.2.0 client (it closes the connection)."""
    return encode_command(CommandType.REACHED_END_OF_TOPIC, consumer_id=consumer_id)


def topic_migrated(
    resource_id: int,
    resource_type: ResourceType | int,
    broker_service_url: str | None = None,
    broker_service_url_tls: str | None = None,
) -> bytes:
    return encode_command(
        CommandType.TOPIC_MIGRATED,
        resource_id=resource_id,
        resource_type=int(resource_type),
        brokerServiceUrl=broker_service_url,
        brokerServiceUrlTls=broker_service_url_tls,
    )


def consumer_stats_response(request_id: int, **stats: Any) -> bytes:
    """CONSUMER_STATS_RESPONSE; ``stats`` uses the proto field names (msgRateOut, ...)."""
    return encode_command(CommandType.CONSUMER_STATS_RESPONSE, request_id=u64(request_id), **stats)


def watch_topic_list_success(
    request_id: int, watcher_id: int, topics: Iterable[str], topics_hash: str
) -> bytes:
    return encode_command(
        CommandType.WATCH_TOPIC_LIST_SUCCESS,
        request_id=u64(request_id),
        watcher_id=watcher_id,
        topic=list(topics),
        topics_hash=topics_hash,
    )


def watch_topic_update(
    watcher_id: int, new_topics: Iterable[str], deleted_topics: Iterable[str], topics_hash: str
) -> bytes:
    return encode_command(
        CommandType.WATCH_TOPIC_UPDATE,
        watcher_id=watcher_id,
        new_topics=list(new_topics),
        deleted_topics=list(deleted_topics),
        topics_hash=topics_hash,
    )


def _txn_response(command_type: CommandType, request_id: int, **fields: Any) -> bytes:
    if fields.get("error") is not None:
        fields["error"] = int(fields["error"])
    return encode_command(command_type, request_id=u64(request_id), **fields)


def tc_client_connect_response(
    request_id: int, error: int | None = None, message: str | None = None
) -> bytes:
    return _txn_response(CommandType.TC_CLIENT_CONNECT_RESPONSE, request_id, error=error, message=message)


def new_txn_response(
    request_id: int,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
    error: int | None = None,
    message: str | None = None,
) -> bytes:
    return _txn_response(
        CommandType.NEW_TXN_RESPONSE,
        request_id,
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        error=error,
        message=message,
    )


def txn_op_response(
    command_type: CommandType,
    request_id: int,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
    error: int | None = None,
    message: str | None = None,
) -> bytes:
    """ADD_PARTITION_TO_TXN / ADD_SUBSCRIPTION_TO_TXN / END_TXN(_ON_*) responses (same shape)."""
    return _txn_response(
        command_type,
        request_id,
        txnid_least_bits=txnid_least_bits,
        txnid_most_bits=txnid_most_bits,
        error=error,
        message=message,
    )
