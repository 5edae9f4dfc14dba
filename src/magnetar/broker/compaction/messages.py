"""Reading keys out of stored entries, and rewriting a batch without its compacted-out messages.

Theory of operation: the compactor works per *message*, but a stored entry is
either one message or a batch.  :func:`parse_entry` turns an entry's stored
bytes into :class:`KeyedMessage` records -- one for a single message
(``batch_index == -1``), one per record of a batch (the batch payload is
decompressed and split with the protocol's batch codec).  A message's key is
its ``partition_key`` (what ``producer.send(partition_key=...)`` sets and what
Pulsar's compactor and TableView key on); a message whose payload is empty or
that has ``null_value`` set is a *delete* of its key.  Entries that carry no
user data (server markers) or that cannot be parsed yield records without a key.

:func:`rewrite_entry` builds the stored bytes that go to the compacted ledger:

* a single message is kept byte for byte or dropped;
* a batch whose records are all kept is kept byte for byte; a batch with no
  record kept is dropped; otherwise the batch is re-encoded.  With
  ``BatchMode.MARK_COMPACTED_OUT`` (Pulsar's way) every record stays and the
  dropped ones get ``compacted_out=true`` and an empty payload, so batch
  indexes -- and thus message ids and ack sets -- are unchanged; with
  ``BatchMode.DROP`` (the compactor's default, because the official C++ client
  delivers compacted-out records as empty messages) they are removed.  The payload is
  compressed again with the batch's codec and the metadata's
  ``num_messages_in_batch`` / ``uncompressed_size`` updated; the new
  headers-and-payload has a fresh CRC32-C, and a leading broker-entry-metadata
  block is kept as it was.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.compression import compress, decompress
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.payload import (
    build_headers_and_payload,
    is_batch,
    parse_headers_and_payload,
    strip_broker_entry_metadata,
)


class BatchMode(enum.Enum):
    MARK_COMPACTED_OUT = "mark"
    DROP = "drop"


@dataclass(frozen=True, slots=True)
class KeyedMessage:
    batch_index: int  # -1: the entry is a single message
    key: str | None
    is_delete: bool


@dataclass(slots=True)
class ParsedEntry:
    stored: bytes
    messages: list[KeyedMessage]
    # Filled for a readable batch: what rewrite_entry needs to re-encode it.
    metadata: Any = None
    records: list[SingleMessage] | None = None
    corrupt: bool = False

    @property
    def is_batch(self) -> bool:
        return self.records is not None


def _single_is_delete(meta: Any, payload: bytes) -> bool:
    if meta.null_value:
        return True
    if meta.compression and meta.HasField("uncompressed_size"):
        return meta.uncompressed_size == 0
    return len(payload) == 0


def parse_entry(stored: bytes) -> ParsedEntry:
    """Key and delete flag of every message in the entry (see the module docstring)."""
    try:
        parsed = parse_headers_and_payload(stored, verify=False)
    except ProtocolError:
        return ParsedEntry(stored, [KeyedMessage(-1, None, False)], corrupt=True)
    meta = parsed.metadata
    if meta.HasField("marker_type"):
        return ParsedEntry(stored, [])  # server-only marker: never part of the compacted view
    if not is_batch(meta):
        key = meta.partition_key if meta.HasField("partition_key") else None
        return ParsedEntry(stored, [KeyedMessage(-1, key, _single_is_delete(meta, parsed.payload))])
    try:
        payload = parsed.payload
        if meta.compression:
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        records = decode_batch(payload, meta.num_messages_in_batch)
    except ProtocolError:
        return ParsedEntry(stored, [KeyedMessage(-1, None, False)], corrupt=True)
    messages = []
    for i, rec in enumerate(records):
        if rec.compacted_out:
            continue  # already gone in an earlier compaction
        messages.append(KeyedMessage(i, rec.partition_key, rec.null_value or not rec.payload))
    return ParsedEntry(stored, messages, metadata=meta, records=records)


def rewrite_entry(entry: ParsedEntry, keep: Callable[[int], bool], mode: BatchMode) -> bytes | None:
    """The stored bytes with only the messages ``keep(batch_index)`` accepts, or None if none."""
    kept = [m.batch_index for m in entry.messages if keep(m.batch_index)]
    if not kept:
        return None
    records = entry.records
    if records is None:
        return entry.stored
    kept_set = set(kept)
    if len(kept_set) == len(records):
        return entry.stored
    if mode is BatchMode.MARK_COMPACTED_OUT:
        out = [rec if i in kept_set else _compacted_out(rec) for i, rec in enumerate(records)]
    else:
        out = [rec for i, rec in enumerate(records) if i in kept_set]
    meta = type(entry.metadata)()
    meta.CopyFrom(entry.metadata)
    raw = encode_batch(out)
    meta.num_messages_in_batch = len(out)
    if meta.compression:
        meta.uncompressed_size = len(raw)
        body = compress(meta.compression, raw)
    else:
        if meta.HasField("uncompressed_size"):
            meta.uncompressed_size = len(raw)
        body = raw
    rest = strip_broker_entry_metadata(entry.stored)
    prefix = entry.stored[: len(entry.stored) - len(rest)]
    return prefix + build_headers_and_payload(meta, body)


def _compacted_out(rec: SingleMessage) -> SingleMessage:
    return SingleMessage(
        payload=b"",
        properties=rec.properties,
        partition_key=rec.partition_key,
        partition_key_b64_encoded=rec.partition_key_b64_encoded,
        ordering_key=rec.ordering_key,
        event_time=rec.event_time,
        sequence_id=rec.sequence_id,
        null_value=rec.null_value,
        null_partition_key=rec.null_partition_key,
        compacted_out=True,
    )
