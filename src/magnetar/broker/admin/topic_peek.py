"""Reading messages over the admin API: peek, examine, get by id.

Theory of operation: these read entries without moving any cursor -- the
``n``-th entry of a subscription's backlog (peek), the ``n``-th from the start
or the end of the topic (examine), or one entry by ledger and entry id -- and
return a :class:`PeekedMessage`: the entry's payload (a batch's whole payload,
decompressed) plus the metadata the web layer sends as Pulsar's
``X-Pulsar-*`` headers (message id, publish / event / deliver-at times,
properties both as one JSON header and one header each, batch size, producer,
sequence id, partition key).  One topic only: a partitioned base name is
refused.  A position past the end is 404 "Message not found".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from magnetar.broker import errors
from magnetar.broker.admin.topic_cursor_ops import CursorOps
from magnetar.managed_ledger.api import ManagedLedgerError, Position
from magnetar.protocol.compression import decompress
from magnetar.protocol.payload import parse_headers_and_payload

PEEK_POSITION_MAX = 100_000


@dataclass
class PeekedMessage:
    ledger_id: int
    entry_id: int
    payload: bytes
    headers: dict[str, str] = field(default_factory=dict)


class PeekOps(CursorOps):
    async def peek(self, topic: str, sub: str, position: int) -> PeekedMessage:
        if not 1 <= position <= PEEK_POSITION_MAX:
            raise errors.PreconditionFailedError("Message position must be >= 1")
        (t,) = await self._topics(topic, allow_partitioned=False)
        entries = await self._cursor(t, sub).peek_entries(position)
        if len(entries) < position:
            raise errors.TopicNotFoundError("Message not found")
        return self._message(entries[position - 1])

    async def examine(self, topic: str, initial: str, position: int) -> PeekedMessage:
        if initial not in ("earliest", "latest"):
            raise errors.PreconditionFailedError("initialPosition must be earliest or latest")
        if not 1 <= position <= PEEK_POSITION_MAX:
            raise errors.PreconditionFailedError("messagePosition must be >= 1")
        (t,) = await self._topics(topic, allow_partitioned=False)
        if initial == "earliest":
            entries = await t.ml.read_entries_from(Position(0, 0), position)
            if len(entries) < position:
                raise errors.TopicNotFoundError("Message not found")
            return self._message(entries[position - 1])
        total = t.ml.number_of_entries
        if position > total:
            raise errors.TopicNotFoundError("Message not found")
        entries = await t.ml.read_entries_from(Position(0, 0), total)
        return self._message(entries[len(entries) - position])

    async def get_by_id(self, topic: str, ledger_id: int, entry_id: int) -> PeekedMessage:
        (t,) = await self._topics(topic, allow_partitioned=False)
        try:
            entry = await t.ml.read_entry(Position(ledger_id, entry_id))
        except ManagedLedgerError:
            raise errors.TopicNotFoundError("Message not found") from None
        return self._message(entry)

    @staticmethod
    def _message(entry: Any) -> PeekedMessage:
        parsed = parse_headers_and_payload(entry.data, verify=False)
        meta = parsed.metadata
        payload = parsed.payload
        h: dict[str, str] = {"X-Pulsar-Message-ID": f"{entry.ledger_id}:{entry.entry_id}"}
        if meta.compression:
            h["X-Pulsar-compression"] = str(meta.compression)
            h["X-Pulsar-uncompressed-size"] = str(meta.uncompressed_size)
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        props = {kv.key: kv.value for kv in meta.properties}
        if props:
            h["X-Pulsar-PROPERTY"] = json.dumps(props)
            for k, v in props.items():
                h[f"X-Pulsar-PROPERTY-{k}"] = v
        h["X-Pulsar-publish-time"] = _iso(meta.publish_time)
        if meta.HasField("event_time") and meta.event_time:
            h["X-Pulsar-event-time"] = _iso(meta.event_time)
        if meta.HasField("deliver_at_time"):
            h["X-Pulsar-deliver-at-time"] = _iso(meta.deliver_at_time)
        if meta.HasField("num_messages_in_batch"):
            h["X-Pulsar-num-batch-message"] = str(meta.num_messages_in_batch)
            h["X-Pulsar-batch-size"] = str(len(payload))
        if meta.HasField("null_value") and meta.null_value:
            h["X-Pulsar-null-value"] = "true"
        h["X-Pulsar-producer-name"] = meta.producer_name
        h["X-Pulsar-sequence-id"] = str(meta.sequence_id)
        if meta.HasField("partition_key"):
            h["X-Pulsar-partition-key"] = meta.partition_key
        return PeekedMessage(entry.ledger_id, entry.entry_id, bytes(payload), h)


def _iso(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    frac = ms % 1000
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:03d}".rstrip("0").rstrip(".") + "Z" if frac else base + "Z"
