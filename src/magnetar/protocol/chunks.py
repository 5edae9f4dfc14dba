"""Chunked messages: one large payload sent as several SENDs.

Theory of operation: a producer with chunking splits a (compressed) payload
larger than max_message_size into N chunks. Every chunk is its own SEND with
the *same* sequence id, ``CommandSend.is_chunk = true``, and metadata carrying
``uuid = "<producer_name>-<sequence_id>"``, ``num_chunks_from_msg = N``,
``total_chunk_msg_size`` (the whole payload size) and ``chunk_id`` 0..N-1. The
chunk payload size is max_message_size minus the metadata size.

The broker treats chunks as ordinary entries. Consumers reassemble them by
uuid; ``ChunkAssembler`` does that with explicit bounds (pending messages,
bytes per message, expiry given as data: the caller passes ``now_ms``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from magnetar.protocol.errors import CorruptPayload


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    uuid: str
    chunk_id: int
    num_chunks: int
    total_size: int


def is_chunk(meta: Any) -> bool:
    """True if the metadata describes one chunk of a multi-chunk message."""
    return meta.HasField("uuid") and meta.HasField("num_chunks_from_msg") and meta.num_chunks_from_msg > 1


def chunk_info(meta: Any) -> ChunkInfo | None:
    if not is_chunk(meta):
        return None
    return ChunkInfo(meta.uuid, meta.chunk_id, meta.num_chunks_from_msg, meta.total_chunk_msg_size)


def chunk_uuid(producer_name: str, sequence_id: int) -> str:
    return f"{producer_name}-{sequence_id}"


def split_payload(payload: bytes, chunk_size: int) -> list[bytes]:
    """Cut a payload into chunks of at most ``chunk_size`` bytes (at least one chunk)."""
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    if not payload:
        return [b""]
    return [payload[i : i + chunk_size] for i in range(0, len(payload), chunk_size)]


@dataclass(slots=True)
class _Pending:
    info: ChunkInfo
    started_ms: int
    parts: list[bytes] = field(default_factory=list)
    size: int = 0


class ChunkAssembler:
    """Reassemble chunked messages; bounded in count, size and age."""

    def __init__(self, max_pending: int = 10, expire_ms: int = 60_000, max_total_size: int = 64 << 20):
        self.max_pending = max_pending
        self.expire_ms = expire_ms
        self.max_total_size = max_total_size
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, meta: Any, payload: bytes, now_ms: int) -> bytes | None:
        """Feed one chunk; return the whole payload when its last chunk arrives."""
        info = chunk_info(meta)
        if info is None:
            raise CorruptPayload("metadata does not describe a chunk")
        if info.total_size < 0 or info.total_size > self.max_total_size:
            raise CorruptPayload(f"chunked message of {info.total_size} bytes exceeds the limit")
        self.expire(now_ms)
        pending = self._pending.get(info.uuid)
        if info.chunk_id == 0:
            if pending is not None:
                self.dropped += 1  # a restart of the same message: begin again
            while len(self._pending) >= self.max_pending:
                self._pending.popitem(last=False)
                self.dropped += 1
            pending = _Pending(info, now_ms)
            self._pending[info.uuid] = pending
        elif (
            pending is None
            or info.chunk_id != len(pending.parts)
            or info.num_chunks != pending.info.num_chunks
        ):
            # Out of order or unknown: drop what we have (the client acks and forgets it).
            if pending is not None:
                del self._pending[info.uuid]
            self.dropped += 1
            return None
        pending.parts.append(payload)
        pending.size += len(payload)
        if pending.size > info.total_size:
            del self._pending[info.uuid]
            raise CorruptPayload(f"chunks of {info.uuid} exceed total_chunk_msg_size")
        if len(pending.parts) == info.num_chunks:
            del self._pending[info.uuid]
            whole = b"".join(pending.parts)
            if len(whole) != info.total_size:
                raise CorruptPayload(f"chunks of {info.uuid} add up to {len(whole)}, not {info.total_size}")
            return whole
        return None

    def expire(self, now_ms: int) -> int:
        """Drop pending messages older than expire_ms; return how many."""
        dropped = 0
        while self._pending:
            uuid, pending = next(iter(self._pending.items()))
            if now_ms - pending.started_ms < self.expire_ms:
                break
            del self._pending[uuid]
            dropped += 1
        self.dropped += dropped
        return dropped
