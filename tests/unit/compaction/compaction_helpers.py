"""Builders of stored entries exactly as a client sends them, a workload model and a view reader."""

from __future__ import annotations

import random
from dataclasses import dataclass

from magnetar.broker.compaction import CompactedTopicReader
from magnetar.managed_ledger.api import ManagedLedger
from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.compression import compress, decompress
from magnetar.protocol.enums import CompressionType
from magnetar.protocol.payload import (
    build_headers_and_payload,
    new_message_metadata,
    parse_headers_and_payload,
)

CODECS = [
    CompressionType.NONE,
    CompressionType.LZ4,
    CompressionType.ZLIB,
    CompressionType.ZSTD,
    CompressionType.SNAPPY,
]


def single(key: str | None, value: bytes, seq: int, *, codec: int = 0, null_value: bool = False) -> bytes:
    body = compress(codec, value) if codec else value
    meta = new_message_metadata(
        producer_name="p",
        sequence_id=seq,
        publish_time=1_700_000_000_000 + seq,
        partition_key=key,
        compression=codec or None,
        uncompressed_size=len(value) if codec else None,
        null_value=True if null_value else None,
    )
    return build_headers_and_payload(meta, body)


def batch(records: list[tuple[str | None, bytes, bool]], seq: int, *, codec: int = 0) -> bytes:
    """records: (key, value, null_value)."""
    raw = encode_batch(
        [
            SingleMessage(payload=v, partition_key=k, sequence_id=seq + i, null_value=n)
            for i, (k, v, n) in enumerate(records)
        ]
    )
    meta = new_message_metadata(
        producer_name="p",
        sequence_id=seq,
        publish_time=1_700_000_000_000 + seq,
        num_messages_in_batch=len(records),
        compression=codec or None,
        uncompressed_size=len(raw) if codec else None,
        highest_sequence_id=seq + len(records) - 1,
    )
    return build_headers_and_payload(meta, compress(codec, raw) if codec else raw)


def decode_messages(stored: bytes) -> list[tuple[str | None, bytes, bool]]:
    """(key, value, null_value) of every delivered message of an entry; compacted-out ones skipped."""
    parsed = parse_headers_and_payload(stored)
    assert parsed.checksum_ok, "entry CRC must be valid"
    meta = parsed.metadata
    if not meta.HasField("num_messages_in_batch"):
        key = meta.partition_key if meta.HasField("partition_key") else None
        payload = parsed.payload
        if meta.compression:
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        return [(key, payload, meta.null_value)]
    payload = parsed.payload
    if meta.compression:
        payload = decompress(meta.compression, payload, meta.uncompressed_size)
    return [
        (r.partition_key, r.payload, r.null_value)
        for r in decode_batch(payload, meta.num_messages_in_batch)
        if not r.compacted_out
    ]


@dataclass
class Workload:
    """Random updates over ``keys`` keys (some deletes), batched and single, every codec."""

    seed: int
    keys: int = 100
    delete_ratio: float = 0.05
    batched_ratio: float = 0.5

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.model: dict[str, bytes] = {}
        self.seq = 0
        self.messages = 0

    def _message(self) -> tuple[str, bytes, bool]:
        key = f"key-{self.rng.randrange(self.keys):03d}"
        self.seq += 1
        self.messages += 1
        if self.rng.random() < self.delete_ratio:
            self.model.pop(key, None)
            return key, b"", self.rng.random() < 0.5
        value = b"v-%s-%d" % (key.encode(), self.seq)
        self.model[key] = value
        return key, value, False

    def entries(self, n_messages: int) -> list[tuple[bytes, int]]:
        """(stored bytes, messages in it) for about ``n_messages`` messages."""
        out = []
        target = self.messages + n_messages
        while self.messages < target:
            codec = self.rng.choice(CODECS)
            if self.rng.random() < self.batched_ratio:
                n = min(self.rng.randint(1, 20), target - self.messages)
                recs = [self._message() for _ in range(n)]
                out.append((batch(recs, self.seq, codec=codec), n))
            else:
                k, v, null = self._message()
                out.append((single(k, v, self.seq, codec=codec, null_value=null), 1))
        return out

    async def append(self, ml: ManagedLedger, n_messages: int, chunk: int = 500) -> None:
        entries = self.entries(n_messages)
        for i in range(0, len(entries), chunk):
            for data, n in entries[i : i + chunk]:
                await ml.add_entry(data, num_messages=n)


async def read_view(reader: CompactedTopicReader, max_entries: int = 64) -> list[tuple]:
    """Everything the compacted view has from the reader's position: (position, key, value, null)."""
    out = []
    while True:
        entries = await reader.read_entries(max_entries)
        if not entries:
            return out
        for e in entries:
            for key, value, null in decode_messages(e.data):
                out.append((e.position, key, value, null))
