"""Building what a producer sends: single messages, batches, chunks, each as a ready SEND frame.

Theory of operation: the producer turns each ``send`` into an
:class:`OutgoingMessage` (payload after the schema, keys, properties, times,
its future) and, from one or more of them, into :class:`OpSend` records: a
fully encoded SEND frame plus the futures it completes. Frames are encoded
once and kept until their SEND_RECEIPT, so a reconnect can write the same
bytes again (same sequence ids: the broker's deduplication sees a retry).

* ``single_ops``: one message, not batched. If its (compressed) payload is
  larger than the broker's max message size it is cut into chunks (with
  ``chunking_enabled``) -- one OpSend per chunk, all with the message's
  sequence id, sharing a :class:`ChunkState` that remembers the first chunk's
  id for the chunked MessageId -- or refused with ``MessageTooBig``.
* :class:`BatchContainer`: collects messages until the producer flushes it;
  ``build()`` encodes the records with ``protocol.batch``, compresses the
  whole blob, and writes metadata as the official clients do: sequence id of
  the first message, ``highest_sequence_id`` of the last,
  ``num_messages_in_batch`` always present, keys, replication and the publish
  time (stamped when the first message was queued, as the C++ client does)
  copied from the first message.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from magnetar.client.errors import MessageTooBig
from magnetar.protocol import client_commands
from magnetar.protocol.batch import SingleMessage, encode_batch
from magnetar.protocol.chunks import chunk_uuid
from magnetar.protocol.compression import compress
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata


@dataclass(slots=True)
class OutgoingMessage:
    payload: bytes
    future: asyncio.Future[MessageId]
    sequence_id: int = -1
    properties: dict[str, str] | None = None
    partition_key: str | None = None
    ordering_key: bytes | None = None
    event_time: int | None = None
    deliver_at: int | None = None
    replicate_to: list[str] | None = None
    schema_version: bytes | None = None
    callback: Callable[[Any, Any], None] | None = None
    on_done: Callable[[int], None] | None = None  # releases the client's memory reservation
    publish_time: int = 0  # ms, stamped when the message is queued (as the C++ client does)
    partition_key_b64: bool = False  # the key is base64 of bytes (KeyValue SEPARATED)
    txnid: tuple[int, int] | None = None  # (most, least) of a transactional send: never batched


@dataclass(slots=True)
class ChunkState:
    first: MessageId | None = None


@dataclass(slots=True)
class OpSend:
    sequence_id: int
    highest_sequence_id: int
    frame: bytes
    messages: list[OutgoingMessage]
    created_s: float
    is_batch: bool = False
    chunk_id: int = -1
    num_chunks: int = 0
    chunk_state: ChunkState | None = None
    num_counted: int = 1  # messages this op holds against max_pending_messages

    @property
    def is_last_chunk(self) -> bool:
        return self.chunk_id == self.num_chunks - 1


@dataclass(slots=True)
class ProducerIdentity:
    producer_id: int
    producer_name: str
    compression: int
    max_message_size: int
    chunking_enabled: bool


def _metadata(ident: ProducerIdentity, msg: OutgoingMessage, publish_time: int, **extra: Any) -> Any:
    meta = new_message_metadata(
        producer_name=ident.producer_name,
        sequence_id=msg.sequence_id,
        publish_time=publish_time,
        properties=msg.properties,
        partition_key=msg.partition_key,
        ordering_key=msg.ordering_key,
        event_time=msg.event_time,
        deliver_at_time=msg.deliver_at,
        replicate_to=msg.replicate_to,
        schema_version=msg.schema_version or None,
        **extra,
    )
    if msg.partition_key_b64:
        meta.partition_key_b64_encoded = True
    return meta


def single_ops(
    ident: ProducerIdentity, msg: OutgoingMessage, publish_time: int, now_s: float
) -> list[OpSend]:
    """One OpSend for a non-batched message, or one per chunk."""
    body = compress(ident.compression, msg.payload) if ident.compression else msg.payload
    extra: dict[str, Any] = {}
    if ident.compression:
        extra = {"compression": ident.compression, "uncompressed_size": len(msg.payload)}
    txn: dict[str, Any] = {}
    if msg.txnid is not None:  # in the metadata too: the broker's transaction buffer reads it back
        txn = {"txnid_most_bits": msg.txnid[0], "txnid_least_bits": msg.txnid[1]}
    meta = _metadata(ident, msg, msg.publish_time or publish_time, **extra, **txn)
    limit = ident.max_message_size
    if len(body) + meta.ByteSize() <= limit:
        frame = client_commands.send(
            ident.producer_id, msg.sequence_id, build_headers_and_payload(meta, body), **txn
        )
        return [OpSend(msg.sequence_id, msg.sequence_id, frame, [msg], now_s)]
    if not ident.chunking_enabled:
        raise MessageTooBig(f"message of {len(body)} bytes exceeds the max message size {limit}")
    meta.uuid = chunk_uuid(ident.producer_name, msg.sequence_id)
    meta.num_chunks_from_msg = 1
    meta.total_chunk_msg_size = len(body)
    meta.chunk_id = 0
    chunk_size = max(1, limit - meta.ByteSize() - 16)
    pieces = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
    state = ChunkState()
    ops = []
    for i, piece in enumerate(pieces):
        meta.num_chunks_from_msg = len(pieces)
        meta.chunk_id = i
        frame = client_commands.send(
            ident.producer_id, msg.sequence_id, build_headers_and_payload(meta, piece), is_chunk=True, **txn
        )
        op = OpSend(msg.sequence_id, msg.sequence_id, frame, [msg], now_s, chunk_id=i, num_chunks=len(pieces))
        op.chunk_state = state
        op.num_counted = 1 if i == len(pieces) - 1 else 0
        ops.append(op)
    return ops


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_U32 = struct.Struct(">I")


def encode_records(msgs: list[OutgoingMessage]) -> bytes:
    """The batch blob; plain messages (no key, properties or event time) are encoded by hand.

    A plain record's SingleMessageMetadata is just ``payload_size`` (field 3) and
    ``sequence_id`` (field 8): ``18 <varint> 40 <varint>``, the bytes protobuf
    writes for it; anything else goes through ``protocol.batch``.
    """
    parts: list[bytes] = []
    for m in msgs:
        if m.properties or m.partition_key is not None or m.ordering_key is not None or m.event_time:
            parts.append(
                encode_batch(
                    [
                        SingleMessage(
                            payload=m.payload,
                            properties=m.properties or {},
                            partition_key=m.partition_key,
                            partition_key_b64_encoded=m.partition_key_b64,
                            ordering_key=m.ordering_key,
                            event_time=m.event_time,
                            sequence_id=m.sequence_id,
                        )
                    ]
                )
            )
            continue
        meta = b"\x18" + _varint(len(m.payload)) + b"\x40" + _varint(m.sequence_id)
        parts.append(_U32.pack(len(meta)))
        parts.append(meta)
        parts.append(m.payload)
    return b"".join(parts)


class BatchContainer:
    """Messages waiting to go out as one batch entry."""

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages: list[OutgoingMessage] = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.messages)

    def has_room_for(self, msg: OutgoingMessage) -> bool:
        return not self.messages or self.nbytes + len(msg.payload) <= self.max_bytes

    def add(self, msg: OutgoingMessage) -> bool:
        """Add a message; True when the batch is now full and should be flushed."""
        self.messages.append(msg)
        self.nbytes += len(msg.payload)
        return len(self.messages) >= self.max_messages or self.nbytes >= self.max_bytes

    def build(self, ident: ProducerIdentity, publish_time: int, now_s: float) -> OpSend:
        msgs, self.messages, self.nbytes = self.messages, [], 0
        blob = encode_records(msgs)
        extra: dict[str, Any] = {"num_messages_in_batch": len(msgs)}
        body = blob
        if ident.compression:
            body = compress(ident.compression, blob)
            extra.update(compression=ident.compression, uncompressed_size=len(blob))
        first, last = msgs[0], msgs[-1]
        if len(msgs) > 1:
            extra["highest_sequence_id"] = last.sequence_id
        meta = _metadata(ident, first, first.publish_time or publish_time, **extra)
        if meta.properties:
            del meta.properties[:]  # per-message properties live in the records
        if meta.HasField("event_time"):
            meta.ClearField("event_time")
        frame = client_commands.send(
            ident.producer_id,
            first.sequence_id,
            build_headers_and_payload(meta, body),
            num_messages=len(msgs),
            highest_sequence_id=last.sequence_id if len(msgs) > 1 else None,
        )
        op = OpSend(first.sequence_id, last.sequence_id, frame, msgs, now_s, is_batch=True)
        op.num_counted = len(msgs)
        return op
