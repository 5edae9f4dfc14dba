"""Batch containers: many messages in one entry.

Theory of operation: when ``MessageMetadata.num_messages_in_batch`` is present
the (decompressed) payload is a concatenation of records::

    [u32 single_metadata_size][SingleMessageMetadata][payload of payload_size bytes]

``SingleMessageMetadata.payload_size`` is required (proto2) and gives the
record's payload length. The C++ client writes payload_size, partition /
ordering key, properties, event_time (only if set), sequence_id and
null_value; ``encode_batch`` writes the same fields when they are set.
``decode_batch`` checks every size against the buffer and raises
``CorruptPayload`` on anything that does not add up, including trailing bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from magnetar.proto import PulsarApi_pb2 as pb
from magnetar.protocol.errors import CorruptPayload

_U32 = struct.Struct(">I")
# A batch cannot hold more records than bytes; this bounds a hostile count anyway.
MAX_BATCH_RECORDS = 1_000_000


@dataclass(slots=True)
class SingleMessage:
    """One record of a batch: its payload plus the SingleMessageMetadata fields."""

    payload: bytes
    properties: dict[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    partition_key_b64_encoded: bool = False
    ordering_key: bytes | None = None
    event_time: int | None = None
    sequence_id: int | None = None
    null_value: bool = False
    null_partition_key: bool = False
    compacted_out: bool = False

    def to_pb(self) -> Any:
        meta = pb.SingleMessageMetadata()
        meta.payload_size = len(self.payload)
        for key, value in self.properties.items():
            kv = meta.properties.add()
            kv.key = key
            kv.value = value
        if self.partition_key is not None:
            meta.partition_key = self.partition_key
        if self.partition_key_b64_encoded:
            meta.partition_key_b64_encoded = True
        if self.ordering_key is not None:
            meta.ordering_key = self.ordering_key
        if self.event_time is not None:
            meta.event_time = self.event_time
        if self.sequence_id is not None:
            meta.sequence_id = self.sequence_id
        if self.null_value:
            meta.null_value = True
        if self.null_partition_key:
            meta.null_partition_key = True
        if self.compacted_out:
            meta.compacted_out = True
        return meta

    @classmethod
    def from_pb(cls, meta: Any, payload: bytes) -> SingleMessage:
        return cls(
            payload=payload,
            properties={kv.key: kv.value for kv in meta.properties},
            partition_key=meta.partition_key if meta.HasField("partition_key") else None,
            partition_key_b64_encoded=meta.partition_key_b64_encoded,
            ordering_key=meta.ordering_key if meta.HasField("ordering_key") else None,
            event_time=meta.event_time if meta.HasField("event_time") else None,
            sequence_id=meta.sequence_id if meta.HasField("sequence_id") else None,
            null_value=meta.null_value,
            null_partition_key=meta.null_partition_key,
            compacted_out=meta.compacted_out,
        )


def encode_batch(messages: list[SingleMessage]) -> bytes:
    """Serialize records into one (uncompressed) batch payload."""
    parts: list[bytes] = []
    for message in messages:
        raw = message.to_pb().SerializeToString()
        parts.append(_U32.pack(len(raw)))
        parts.append(raw)
        parts.append(message.payload)
    return b"".join(parts)


def decode_batch(payload: bytes | bytearray | memoryview, count: int) -> list[SingleMessage]:
    """Split a batch payload into exactly ``count`` records."""
    return [SingleMessage.from_pb(meta, body) for meta, body in decode_batch_raw(payload, count)]


def parse_single_metadata(raw: bytes | bytearray | memoryview, index: int = 0) -> Any:
    """One record's SingleMessageMetadata (CorruptPayload if unparseable or without payload_size)."""
    meta = pb.SingleMessageMetadata()
    try:
        meta.ParseFromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise CorruptPayload(f"batch record {index}: unparseable metadata: {exc}") from None
    if not meta.HasField("payload_size"):
        raise CorruptPayload(f"batch record {index}: SingleMessageMetadata without payload_size")
    return meta


def decode_batch_raw(payload: bytes | bytearray | memoryview, count: int) -> list[tuple[Any, bytes]]:
    """Like ``decode_batch`` but (SingleMessageMetadata, payload) pairs: a client's hot path."""
    if count < 0 or count > MAX_BATCH_RECORDS:
        raise CorruptPayload(f"batch count {count} out of bounds")
    view = memoryview(payload)
    size = len(view)
    pos = 0
    out: list[tuple[Any, bytes]] = []
    new_meta = pb.SingleMessageMetadata
    unpack = _U32.unpack_from
    for index in range(count):
        if size - pos < 4:
            raise CorruptPayload(f"batch record {index}: truncated metadata size")
        meta_size = unpack(view, pos)[0]
        pos += 4
        if meta_size > size - pos:
            raise CorruptPayload(f"batch record {index}: metadata size {meta_size} exceeds the payload")
        meta = new_meta()
        try:
            meta.ParseFromString(view[pos : pos + meta_size])
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise CorruptPayload(f"batch record {index}: unparseable metadata: {exc}") from None
        if not meta.HasField("payload_size"):
            raise CorruptPayload(f"batch record {index}: SingleMessageMetadata without payload_size")
        pos += meta_size
        length = meta.payload_size
        if length < 0 or length > size - pos:
            raise CorruptPayload(f"batch record {index}: payload size {length} exceeds the payload")
        out.append((meta, bytes(view[pos : pos + length])))
        pos += length
    if pos != size:
        raise CorruptPayload(f"{size - pos} trailing bytes after {count} batch records")
    return out
