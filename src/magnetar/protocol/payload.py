"""Headers-and-payload: the part of SEND/MESSAGE frames after the command.

Theory of operation
-------------------
Layout (big-endian)::

    [0x0e02][u32 size][BrokerEntryMetadata]        optional, broker-added (MESSAGE / stored entry)
    [0x0e01][u32 CRC32-C]                          optional: absent for peers below protocol v6
    [u32 metadata_size][MessageMetadata][payload]

The CRC32-C (Castagnoli) covers exactly ``[metadata_size][metadata][payload]``
- not the magic, not the checksum, not the broker-entry block. The broker
stores the bytes from the magic to the end unchanged and replays them behind a
new CommandMessage, so nothing here re-serializes metadata on the hot path:
``peek_metadata`` parses the metadata without touching the payload, and the
accessors (``num_messages``, ``sticky_key``...) read fields the broker needs.

A batch is recognised by the *presence* of ``num_messages_in_batch`` in the
metadata, never by its value; the stored bytes keep that presence as sent.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import Any

import crc32c as _crc32c
from google.protobuf.message import DecodeError, EncodeError

from magnetar.proto import PulsarApi_pb2 as pb
from magnetar.protocol.errors import ChecksumMismatch, CorruptPayload, LocalProtocolError

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
_MAGIC_CRC32C_BYTES = b"\x0e\x01"
_MAGIC_BEM_BYTES = b"\x0e\x02"
NONE_KEY = b"NONE_KEY"

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U32_PAIR = struct.Struct(">II")


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Standard CRC32-C; ``value`` continues a previous CRC."""
    return _crc32c.crc32c(data, value)


@dataclass(slots=True)
class ParsedPayload:
    """A decoded headers-and-payload block.

    ``metadata_bytes`` is the serialized MessageMetadata exactly as received;
    ``checksum_ok`` is True when the CRC matched or when there was none
    (``has_checksum`` tells which).
    """

    metadata: Any
    metadata_bytes: bytes
    payload: bytes
    checksum_ok: bool
    has_checksum: bool
    checksum: int | None
    broker_entry_metadata: Any | None

    def raise_for_checksum(self) -> None:
        if not self.checksum_ok:
            assert self.checksum is not None
            raise ChecksumMismatch(self.checksum, _computed_crc(self))


def _computed_crc(parsed: ParsedPayload) -> int:
    head = _U32.pack(len(parsed.metadata_bytes)) + parsed.metadata_bytes
    return crc32c(parsed.payload, crc32c(head))


def _split_broker_entry_metadata(buf: memoryview) -> tuple[Any | None, int]:
    """Parse an optional 0x0e02 block; return (BrokerEntryMetadata | None, offset after it)."""
    if len(buf) >= 2 and buf[0] == 0x0E and buf[1] == 0x02:
        if len(buf) < 6:
            raise CorruptPayload("truncated broker-entry-metadata header")
        size = _U32.unpack_from(buf, 2)[0]
        if 6 + size > len(buf):
            raise CorruptPayload(f"broker-entry-metadata size {size} exceeds the frame")
        bem = pb.BrokerEntryMetadata()
        try:
            bem.ParseFromString(buf[6 : 6 + size])
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise CorruptPayload(f"unparseable BrokerEntryMetadata: {exc}") from None
        return bem, 6 + size
    return None, 0


def _parse_metadata(raw: bytes | memoryview) -> Any:
    meta = pb.MessageMetadata()
    try:
        meta.ParseFromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise CorruptPayload(f"unparseable MessageMetadata: {exc}") from None
    if not meta.IsInitialized():
        missing = ", ".join(meta.FindInitializationErrors())
        raise CorruptPayload(f"MessageMetadata lacks required fields: {missing}")
    return meta


def _locate(buf: memoryview) -> tuple[Any | None, int | None, int, int]:
    """Return (broker_entry_metadata, checksum or None, metadata start, metadata end)."""
    bem, pos = _split_broker_entry_metadata(buf)
    checksum = None
    if len(buf) - pos >= 2 and buf[pos] == 0x0E and buf[pos + 1] == 0x01:
        if len(buf) - pos < 6:
            raise CorruptPayload("truncated checksum")
        checksum = _U32.unpack_from(buf, pos + 2)[0]
        pos += 6
    if len(buf) - pos < 4:
        raise CorruptPayload("truncated metadata size")
    metadata_size = _U32.unpack_from(buf, pos)[0]
    start = pos + 4
    end = start + metadata_size
    if end > len(buf):
        raise CorruptPayload(f"metadata size {metadata_size} exceeds the frame")
    return bem, checksum, start, end


def parse_headers_and_payload(buf: bytes | bytearray | memoryview, verify: bool = True) -> ParsedPayload:
    """Decode headers-and-payload. With ``verify`` the CRC is checked (result in ``checksum_ok``)."""
    view = memoryview(buf)
    bem, checksum, start, end = _locate(view)
    metadata_bytes = bytes(view[start:end])
    meta = _parse_metadata(metadata_bytes)
    checksum_ok = True
    if checksum is not None and verify:
        checksum_ok = crc32c(view[start - 4 :]) == checksum
    return ParsedPayload(
        metadata=meta,
        metadata_bytes=metadata_bytes,
        payload=bytes(view[end:]),
        checksum_ok=checksum_ok,
        has_checksum=checksum is not None,
        checksum=checksum,
        broker_entry_metadata=bem,
    )


def verify_checksum(buf: bytes | bytearray | memoryview) -> bool:
    """True if the CRC32-C matches (or there is none), without parsing the metadata."""
    view = memoryview(buf)
    _bem, checksum, start, _end = _locate(view)
    return checksum is None or crc32c(view[start - 4 :]) == checksum


# Tag bytes of MessageMetadata.num_messages_in_batch (11, varint) and marker_type (20,
# varint): a field is present only if its tag's bytes occur in the serialized metadata.
_TAG_NUM_MESSAGES = b"\x58"
_TAG_MARKER_TYPE = b"\xa0\x01"


def send_facts(buf: bytes) -> tuple[bool, int, int | None]:
    """(checksum ok, messages in the entry, marker type or None) of a SEND's
    headers-and-payload, with one walk of the headers: the publish hot path.

    The CRC32-C is checked here and nowhere else on the way to storage.  The facts are kept
    beside the stored entry so dispatch never parses it again; they equal
    :func:`dispatch_facts` (tests/unit/protocol compare them).  Most entries have neither
    fact's field, and a field is present only if its tag bytes occur in the metadata, so a
    C-speed search of the metadata's bytes decides; only a hit (a batch, a marker, or the
    same bytes inside some other field) pays for the parse.  Metadata that does not parse
    gives (1, None), what dispatch falls back to for it."""
    if len(buf) >= 10 and buf[0] == 0x0E and buf[1] == 0x01:  # what clients send: no 0x0e02 block
        checksum, metadata_size = _U32_PAIR.unpack_from(buf, 2)
        start, end = 10, 10 + metadata_size
        if end > len(buf):
            raise CorruptPayload(f"metadata size {metadata_size} exceeds the frame")
        view = memoryview(buf)
    else:
        view = memoryview(buf)
        _bem, checksum, start, end = _locate(view)
    ok = checksum is None or crc32c(view[start - 4 :]) == checksum
    if buf.find(_TAG_NUM_MESSAGES, start, end) < 0 and buf.find(_TAG_MARKER_TYPE, start, end) < 0:
        return ok, 1, None
    meta = pb.MessageMetadata()
    try:
        meta.ParseFromString(view[start:end])
    except (DecodeError, RuntimeError, ValueError):
        return ok, 1, None
    n = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
    return ok, n, (meta.marker_type if meta.HasField("marker_type") else None)


def peek_metadata(buf: bytes | bytearray | memoryview) -> Any:
    """Parse only the MessageMetadata (no checksum, no payload copy): the broker's hot path."""
    view = memoryview(buf)
    _bem, _checksum, start, end = _locate(view)
    return _parse_metadata(view[start:end])


def dispatch_facts(buf: bytes | bytearray | memoryview) -> tuple[int, int | None]:
    """(messages in the entry, marker type or None) of a stored entry: the dispatch hot path.

    Unlike :func:`peek_metadata` the required fields are not checked (the broker checked
    them when the entry was published, and the count does not need them); that check costs
    as much as the parse itself."""
    view = memoryview(buf)
    _bem, _checksum, start, end = _locate(view)
    meta = pb.MessageMetadata()
    try:
        meta.ParseFromString(view[start:end])
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise CorruptPayload(f"unparseable MessageMetadata: {exc}") from None
    n = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
    return n, (meta.marker_type if meta.HasField("marker_type") else None)


def build_headers_and_payload(metadata: Any, payload: bytes | bytearray | memoryview) -> bytes:
    """``[0x0e01][crc32c][metadata_size][metadata][payload]``; ``metadata`` is a pb or its bytes."""
    if isinstance(metadata, bytes | bytearray | memoryview):
        meta_bytes = bytes(metadata)
    else:
        try:
            meta_bytes = metadata.SerializeToString()
        except EncodeError as exc:
            raise LocalProtocolError(f"cannot encode MessageMetadata: {exc}") from None
    head = _U32.pack(len(meta_bytes)) + meta_bytes
    checksum = crc32c(payload, crc32c(head))
    return b"".join((_MAGIC_CRC32C_BYTES, _U32.pack(checksum), head, payload))


def strip_broker_entry_metadata(buf: bytes) -> bytes:
    """The stored bytes without a leading 0x0e02 block (for peers that did not ask for it)."""
    _bem, offset = _split_broker_entry_metadata(memoryview(buf))
    return buf[offset:] if offset else buf


def add_broker_entry_metadata(
    buf: bytes | bytearray | memoryview, broker_timestamp: int | None = None, index: int | None = None
) -> bytes:
    """Prefix headers-and-payload with a 0x0e02 BrokerEntryMetadata block."""
    bem = pb.BrokerEntryMetadata()
    if broker_timestamp is not None:
        bem.broker_timestamp = broker_timestamp
    if index is not None:
        bem.index = index
    raw = bem.SerializeToString()
    return b"".join((_MAGIC_BEM_BYTES, _U32.pack(len(raw)), raw, buf))


# --------------------------------------------------------------------------- metadata helpers


def is_batch(meta: Any) -> bool:
    """A batch container is marked by the presence of num_messages_in_batch."""
    return meta.HasField("num_messages_in_batch")


def num_messages(meta: Any) -> int:
    """Messages in the entry: num_messages_in_batch if present, else 1 (permits count these)."""
    return meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1


def publish_time(meta: Any) -> int:
    return meta.publish_time


def deliver_at_time(meta: Any) -> int | None:
    """Absolute delayed-delivery time in ms, or None."""
    return meta.deliver_at_time if meta.HasField("deliver_at_time") else None


def sticky_key(meta: Any) -> bytes:
    """Key_Shared key: ordering_key > partition_key (base64-decoded if flagged) > b"NONE_KEY".

    An empty key counts as absent (what the broker's Key_Shared dispatch always did)."""
    if meta.HasField("ordering_key") and meta.ordering_key:
        return bytes(meta.ordering_key)
    if meta.HasField("partition_key") and meta.partition_key:
        key = meta.partition_key
        if meta.partition_key_b64_encoded:
            try:
                return base64.b64decode(key)
            except (binascii.Error, ValueError):
                return key.encode()
        return key.encode()
    return NONE_KEY


def properties(meta: Any) -> dict[str, str]:
    return {kv.key: kv.value for kv in meta.properties}


def new_message_metadata(
    *,
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    properties: dict[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: bytes | None = None,
    num_messages_in_batch: int | None = None,
    compression: int | None = None,
    uncompressed_size: int | None = None,
    event_time: int | None = None,
    deliver_at_time: int | None = None,
    schema_version: bytes | None = None,
    replicated_from: str | None = None,
    replicate_to: list[str] | None = None,
    highest_sequence_id: int | None = None,
    null_value: bool | None = None,
    uuid: str | None = None,
    num_chunks_from_msg: int | None = None,
    total_chunk_msg_size: int | None = None,
    chunk_id: int | None = None,
    marker_type: int | None = None,
    txnid_least_bits: int | None = None,
    txnid_most_bits: int | None = None,
) -> Any:
    """Build a MessageMetadata; only arguments that are not None become present fields."""
    meta = pb.MessageMetadata()
    meta.producer_name = producer_name
    meta.sequence_id = sequence_id
    meta.publish_time = publish_time
    for key, value in (properties or {}).items():
        kv = meta.properties.add()
        kv.key = key
        kv.value = value
    if replicate_to:
        meta.replicate_to.extend(replicate_to)
    optional = {
        "partition_key": partition_key,
        "ordering_key": ordering_key,
        "num_messages_in_batch": num_messages_in_batch,
        "compression": compression,
        "uncompressed_size": uncompressed_size,
        "event_time": event_time,
        "deliver_at_time": deliver_at_time,
        "schema_version": schema_version,
        "replicated_from": replicated_from,
        "highest_sequence_id": highest_sequence_id,
        "null_value": null_value,
        "uuid": uuid,
        "num_chunks_from_msg": num_chunks_from_msg,
        "total_chunk_msg_size": total_chunk_msg_size,
        "chunk_id": chunk_id,
        "marker_type": marker_type,
        "txnid_least_bits": txnid_least_bits,
        "txnid_most_bits": txnid_most_bits,
    }
    for name, value in optional.items():
        if value is not None:
            setattr(meta, name, value)
    return meta


def replica_of(parsed: ParsedPayload, source_cluster: str, schema_version: bytes | None = None) -> bytes:
    """A geo-replicator's copy of a stored entry: the same metadata (producer name, sequence
    id, publish time, key, properties ...) plus ``replicated_from = source_cluster``, and the
    same payload bytes (a batch stays one batch, compressed stays compressed).
    ``schema_version``: the remote's version of the entry's schema, when it differs."""
    meta = pb.MessageMetadata()
    meta.CopyFrom(parsed.metadata)
    meta.replicated_from = source_cluster
    if schema_version is not None:
        meta.schema_version = schema_version
    return build_headers_and_payload(meta, parsed.payload)
