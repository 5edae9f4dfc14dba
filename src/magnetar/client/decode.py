"""Turning one MESSAGE frame into the messages the application sees.

Theory of operation: :class:`MessageDecoder` belongs to one partition
consumer and holds what decoding needs across frames: the chunk assembler
(``protocol.chunks.ChunkAssembler``: at most ``max_pending_chunked_message``
incomplete messages, expired after a minute) with the ids of each message's
chunks, and the start filter (``start_id`` / ``start_inclusive``) of readers
and seeks. ``decode(frame, owner)`` does, in order:

1. CRC32-C check -- a mismatch returns None and the consumer acks the entry
   with a validation error, as the official clients do;
2. chunks: a chunk that does not complete its message yields nothing (one
   skipped permit); the last one yields the whole payload with a MessageId
   of the last chunk carrying the first chunk's id;
3. decompression of the (whole) payload;
4. batch records: each gets ``(ledger, entry, partition, index, size)`` (kept
   as a tuple until someone asks for the MessageId: building one costs more
   than the rest of the record); a record whose metadata is only
   ``payload_size`` and ``sequence_id`` -- the common case -- is read by hand,
   others through protobuf;
   indexes whose ``ack_set`` bit is clear were acked before and are skipped,
   and the owner's batch-ack tracker is seeded with the ones still pending;
5. the start filter: messages before the start id are skipped (the broker
   starts a non-durable cursor one entry early, so this is where exclusive
   and inclusive starts are told apart, down to the batch index).

It returns ``(messages, skipped)``; the owner queues the messages and gives
the skipped permits back.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from magnetar.client.message import Message
from magnetar.protocol.batch import MAX_BATCH_RECORDS, parse_single_metadata
from magnetar.protocol.chunks import ChunkAssembler, is_chunk
from magnetar.protocol.compression import decompress
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.frames import Frame
from magnetar.protocol.message_id import INT64_MAX, MessageId
from magnetar.protocol.payload import parse_headers_and_payload


def acked_before(ack_set: list[int], index: int) -> bool:
    """True when the broker's ack_set says batch index ``index`` was acked already (bit clear)."""
    if not ack_set:
        return False
    word = index // 64
    return word >= len(ack_set) or not (ack_set[word] >> (index % 64)) & 1


def is_special(mid: MessageId) -> bool:
    """EARLIEST or LATEST: positions, not messages; nothing is filtered against them."""
    return mid.ledger_id < 0 or mid.ledger_id == INT64_MAX


_U32 = struct.Struct(">I")


def _simple_record(buf: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """(payload_size, sequence_id) when a record's metadata holds only those two varints, else None.

    That is what the official clients write for a message without key, properties
    or event time; anything else is left to protobuf.
    """
    size = seq = -1
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag != 0x18 and tag != 0x40:
            return None
        value = shift = 0
        while True:
            if pos >= end:
                return None
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 63:
                return None
        if tag == 0x18:
            size = value
        else:
            seq = value - (1 << 64) if value >= 1 << 63 else value
    return (size, seq) if size >= 0 else None


def iter_records(payload: bytes, count: int) -> list[tuple[Any, int, int, int]]:
    """[(metadata or None, sequence_id, start, end)] for the ``count`` records of a batch blob."""
    if count < 0 or count > MAX_BATCH_RECORDS:
        raise CorruptPayload(f"batch count {count} out of bounds")
    size = len(payload)
    pos = 0
    out = []
    for index in range(count):
        if size - pos < 4:
            raise CorruptPayload(f"batch record {index}: truncated metadata size")
        meta_size = _U32.unpack_from(payload, pos)[0]
        pos += 4
        end = pos + meta_size
        if end > size:
            raise CorruptPayload(f"batch record {index}: metadata size {meta_size} exceeds the payload")
        simple = _simple_record(payload, pos, end)
        if simple is not None:
            meta, (length, seq) = None, simple
        else:
            meta = parse_single_metadata(payload[pos:end], index)
            length, seq = meta.payload_size, meta.sequence_id if meta.HasField("sequence_id") else -1
        if length > size - end:
            raise CorruptPayload(f"batch record {index}: payload size {length} exceeds the payload")
        out.append((meta, seq, end, end + length))
        pos = end + length
    if pos != size:
        raise CorruptPayload(f"{size - pos} trailing bytes after {count} batch records")
    return out


class MessageDecoder:
    def __init__(self, topic: str, partition: int, max_pending_chunks: int, expire_chunks_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.chunks = ChunkAssembler(max_pending_chunks, expire_chunks_ms)
        self._chunk_ids: dict[str, list[MessageId]] = {}
        self.start_id: MessageId | None = None
        self.start_inclusive = False

    def before_start(self, mid: MessageId) -> bool:
        s = self.start_id
        if s is None or is_special(s):
            return False
        key, skey = (mid.ledger_id, mid.entry_id), (s.ledger_id, s.entry_id)
        if key != skey:
            return key < skey
        if s.batch_index < 0 or mid.batch_index < 0:
            return not self.start_inclusive
        return mid.batch_index < s.batch_index or (
            not self.start_inclusive and mid.batch_index == s.batch_index
        )

    def decode(self, frame: Frame, owner: Any) -> tuple[list[Message], int] | None:
        cmd: Any = frame.command
        parsed = parse_headers_and_payload(frame.headers_and_payload or b"")
        if not parsed.checksum_ok:
            return None
        meta = parsed.metadata
        base = MessageId.from_pb(cmd.message_id)
        part = self.partition
        mid = MessageId(base.ledger_id, base.entry_id, part)
        payload = parsed.payload
        chunk_ids: tuple[MessageId, ...] = ()
        if is_chunk(meta):
            ids = self._chunk_ids.setdefault(meta.uuid, [])
            if meta.chunk_id == 0:
                ids.clear()
            ids.append(mid)
            whole = self.chunks.add(meta, payload, int(time.time() * 1000))
            if whole is None:
                return [], 1
            chunk_ids = tuple(self._chunk_ids.pop(meta.uuid, ids))
            payload = whole
            mid = MessageId(mid.ledger_id, mid.entry_id, part, first_chunk=chunk_ids[0])
        if meta.HasField("compression") and meta.compression:
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        redelivery = cmd.redelivery_count
        schema = owner.parent.schema
        replicated = meta.replicated_from if meta.HasField("replicated_from") else None
        publish, schema_version, producer = meta.publish_time, meta.schema_version, meta.producer_name
        if not meta.HasField("num_messages_in_batch"):
            if self.before_start(mid):
                return [], 1
            msg = Message(
                self.topic, mid, payload, {kv.key: kv.value for kv in meta.properties},
                meta.partition_key if meta.HasField("partition_key") else None,
                meta.ordering_key if meta.HasField("ordering_key") else None,
                publish, meta.event_time, redelivery, schema_version, producer, meta.sequence_id,
                schema, owner, chunk_ids, replicated, meta.partition_key_b64_encoded,
            )  # fmt: skip
            return [msg], 0
        n = meta.num_messages_in_batch
        records = iter_records(payload, n)
        ack_set = list(cmd.ack_set)
        if ack_set:
            owner.seed_batch(mid, {i for i in range(n) if not acked_before(ack_set, i)})
        filtering = self.start_id is not None and not is_special(self.start_id)
        out: list[Message] = []
        skipped = 0
        led, ent, base_seq, topic = mid.ledger_id, mid.entry_id, meta.sequence_id, self.topic
        for i, (rec, seq, start, end) in enumerate(records):
            rid = (led, ent, part, i, n)  # a MessageId is built only when asked for
            if (ack_set and acked_before(ack_set, i)) or (
                filtering and self.before_start(MessageId(led, ent, part, i, n))
            ):
                skipped += 1
                continue
            body = payload[start:end]
            if rec is None:
                out.append(
                    Message(
                        topic, rid, body, {}, None, None, publish, 0, redelivery, schema_version, producer,
                        seq if seq >= 0 else base_seq + i, schema, owner, (), replicated,
                    )
                )  # fmt: skip
                continue
            if rec.compacted_out:
                skipped += 1
                continue
            props = {kv.key: kv.value for kv in rec.properties} if rec.properties else {}
            out.append(
                Message(
                    topic, rid, body, props,
                    rec.partition_key if rec.HasField("partition_key") else None,
                    rec.ordering_key if rec.HasField("ordering_key") else None,
                    publish, rec.event_time, redelivery, schema_version, producer,
                    seq if seq >= 0 else base_seq + i, schema, owner, (), replicated,
                    rec.partition_key_b64_encoded,
                )
            )  # fmt: skip
        return out, skipped
