"""JSON frames of Pulsar's WebSocket API <-> stored entries (no I/O).

Theory of operation: a producer frame (``{"payload": b64, "properties", "key",
"context", "eventTime", "deliverAt", "deliverAfterMs", "replicationClusters"}``)
becomes one stored entry: a MessageMetadata plus the decoded payload, framed
with magic and CRC32-C exactly as a binary client would send it.  A stored
entry going out is split into the consumer frames Pulsar's service sends: a
batch entry into one frame per record (message id with ``batch_index``), a
compressed one decompressed first.  Message ids travel as base64 of the
protobuf ``MessageIdData`` -- the bytes of ``MessageId.serialize()`` in the
official clients.  Errors carry Pulsar's WebSocket error codes (A.8 of the
reference): 3 bad JSON, 7 bad payload encoding / event time.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
from dataclasses import dataclass
from typing import Any

from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.compression import compress, decompress
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import (
    build_headers_and_payload,
    new_message_metadata,
    parse_headers_and_payload,
)

# WebSocketError codes (Pulsar's), used in "send-error:<code>" and as close codes.
FAILED_TO_CREATE_PRODUCER = 1
FAILED_TO_SUBSCRIBE = 2
FAILED_TO_DESERIALIZE_FROM_JSON = 3
FAILED_TO_SERIALIZE_TO_JSON = 4
AUTHENTICATION_ERROR = 5
NOT_AUTHORIZED_ERROR = 6
PAYLOAD_ENCODING_ERROR = 7
UNKNOWN_ERROR = 8


class FrameError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_json_object(text: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FrameError(FAILED_TO_DESERIALIZE_FROM_JSON, f"Failed to deserialize from JSON: {exc}") from None
    if not isinstance(value, dict):
        raise FrameError(FAILED_TO_DESERIALIZE_FROM_JSON, "Failed to deserialize from JSON: not an object")
    return value


def b64decode(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise FrameError(PAYLOAD_ENCODING_ERROR, f"{what} must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FrameError(PAYLOAD_ENCODING_ERROR, f"Invalid {what} encoding: {exc}") from None


def encode_message_id(mid: MessageId) -> str:
    return base64.b64encode(mid.serialize()).decode()


def decode_message_id(text: Any) -> MessageId:
    raw = b64decode(text, "messageId")
    try:
        return MessageId.deserialize(raw)
    except ProtocolError as exc:
        raise FrameError(FAILED_TO_DESERIALIZE_FROM_JSON, f"Invalid messageId: {exc}") from None


def parse_iso_ms(text: Any) -> int:
    if not isinstance(text, str):
        raise ValueError("not a string")
    return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def iso_ms(ms: int) -> str:
    dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    text = dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return text


@dataclass
class OutgoingMessage:
    payload: bytes
    properties: dict[str, str]
    key: str | None
    context: str | None
    event_time: int | None
    deliver_at: int | None
    replicate_to: list[str] | None


def parse_publish(frame: dict[str, Any], now_ms: int) -> OutgoingMessage:
    context = frame.get("context")
    context = None if context is None else str(context)
    if "payload" not in frame:
        raise FrameError(PAYLOAD_ENCODING_ERROR, "Missing payload")
    payload = b64decode(frame["payload"], "payload")
    props = frame.get("properties") or {}
    if not isinstance(props, dict):
        raise FrameError(FAILED_TO_DESERIALIZE_FROM_JSON, "properties must be an object")
    event_time = None
    if frame.get("eventTime"):
        try:
            event_time = parse_iso_ms(frame["eventTime"])
        except (ValueError, TypeError) as exc:
            raise FrameError(PAYLOAD_ENCODING_ERROR, f"Invalid eventTime: {exc}") from None
    deliver_at = None
    try:
        if int(frame.get("deliverAt") or 0) > 0:
            deliver_at = int(frame["deliverAt"])
        elif int(frame.get("deliverAfterMs") or 0) > 0:
            deliver_at = now_ms + int(frame["deliverAfterMs"])
    except (TypeError, ValueError):
        raise FrameError(
            FAILED_TO_DESERIALIZE_FROM_JSON, "deliverAt/deliverAfterMs must be numbers"
        ) from None
    clusters = frame.get("replicationClusters")
    key = frame.get("key")
    return OutgoingMessage(
        payload,
        {str(k): str(v) for k, v in props.items()},
        None if key is None else str(key),
        context,
        event_time,
        deliver_at,
        [str(c) for c in clusters] if isinstance(clusters, list) and clusters else None,
    )


def entry_bytes(
    msg: OutgoingMessage, producer_name: str, sequence_id: int, now_ms: int, compression: int = 0
) -> bytes:
    """One message as one stored entry (payload compressed with ``compression``, a CompressionType)."""
    meta = new_message_metadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time=now_ms,
        properties=msg.properties,
        partition_key=msg.key,
        event_time=msg.event_time,
        deliver_at_time=msg.deliver_at,
        replicate_to=msg.replicate_to,
        uncompressed_size=len(msg.payload),
        compression=compression or None,
    )
    payload = compress(compression, msg.payload) if compression else msg.payload
    return build_headers_and_payload(meta, payload)


def batch_entry_bytes(
    msgs: list[OutgoingMessage],
    producer_name: str,
    first_sequence_id: int,
    now_ms: int,
    compression: int = 0,
) -> bytes:
    """Several messages as one batch entry, as a client's batch container writes it: the
    records' metadata in SingleMessageMetadata, the batch's sequence ids first..highest."""
    records = [
        SingleMessage(
            payload=m.payload,
            properties=m.properties,
            partition_key=m.key,
            event_time=m.event_time,
            sequence_id=first_sequence_id + i,
        )
        for i, m in enumerate(msgs)
    ]
    body = encode_batch(records)
    meta = new_message_metadata(
        producer_name=producer_name,
        sequence_id=first_sequence_id,
        highest_sequence_id=first_sequence_id + len(msgs) - 1,
        publish_time=now_ms,
        num_messages_in_batch=len(msgs),
        uncompressed_size=len(body),
        compression=compression or None,
    )
    return build_headers_and_payload(meta, compress(compression, body) if compression else body)


@dataclass
class DeliveredMessage:
    message_id: MessageId
    frame: dict[str, Any]


def split_entry(
    data: bytes, ledger_id: int, entry_id: int, partition: int, redelivery: int
) -> list[DeliveredMessage]:
    """The consumer frames of one stored entry (one per batch record)."""
    parsed = parse_headers_and_payload(data, verify=False)
    meta = parsed.metadata
    payload = parsed.payload
    if meta.HasField("compression") and meta.compression:
        payload = decompress(meta.compression, payload, meta.uncompressed_size)
    publish = iso_ms(meta.publish_time)
    if not meta.HasField("num_messages_in_batch"):
        frame: dict[str, Any] = {
            "messageId": encode_message_id(MessageId(ledger_id, entry_id, partition)),
            "payload": base64.b64encode(payload).decode(),
            "properties": {kv.key: kv.value for kv in meta.properties},
            "publishTime": publish,
            "redeliveryCount": redelivery,
        }
        if meta.HasField("event_time") and meta.event_time:
            frame["eventTime"] = iso_ms(meta.event_time)
        if meta.HasField("partition_key"):
            frame["key"] = meta.partition_key
        return [DeliveredMessage(MessageId(ledger_id, entry_id, partition), frame)]
    records = decode_batch(payload, meta.num_messages_in_batch)
    out = []
    size = len(records)
    for index, rec in enumerate(records):
        mid = MessageId(ledger_id, entry_id, partition, index, size)
        frame = {
            "messageId": encode_message_id(mid),
            "payload": base64.b64encode(rec.payload).decode(),
            "properties": dict(rec.properties),
            "publishTime": publish,
            "redeliveryCount": redelivery,
        }
        if rec.event_time:
            frame["eventTime"] = iso_ms(rec.event_time)
        if rec.partition_key is not None:
            frame["key"] = rec.partition_key
        if not rec.compacted_out:
            out.append(DeliveredMessage(mid, frame))
    return out
