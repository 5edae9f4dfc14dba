"""Messages read over REST (peek, examine, get-by-id): headers and body to :class:`PeekedMessage`.

Theory of operation: the broker answers with the entry payload (decompressed)
and ``X-Pulsar-*`` headers (``pulsar-admin-rest.md`` 4.3).  A batched entry
carries ``X-Pulsar-num-batch-message`` and its body is the whole batch
payload; it is split here with the protocol layer's batch codec into one
message per record (ids ``L:E`` plus the batch index, as ``pulsar-admin``
prints ``Batch Message ID: L:E:i``).  Properties come either as one JSON
header ``X-Pulsar-PROPERTY`` (3.x/4.x) or one ``X-Pulsar-PROPERTY-<key>``
header each (2.x); both are read.  An undecodable batch is returned whole
rather than failing the read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from magnetar.admin_client.core import RawResponse
from magnetar.admin_client.models import PeekedMessage
from magnetar.protocol.batch import MAX_BATCH_RECORDS, decode_batch
from magnetar.protocol.errors import CorruptPayload

_PROPERTY_PREFIX = "x-pulsar-property-"


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def properties_from_headers(headers: Mapping[str, str]) -> dict[str, str]:
    h = _lower(headers)
    props: dict[str, str] = {}
    if "x-pulsar-property" in h:
        try:
            data = json.loads(h["x-pulsar-property"])
        except ValueError:
            data = None
        if isinstance(data, dict):
            props.update({str(k): str(v) for k, v in data.items()})
    for key, value in h.items():
        if key.startswith(_PROPERTY_PREFIX):
            props[key[len(_PROPERTY_PREFIX) :]] = value
    return props


def parse_messages(raw: RawResponse) -> list[PeekedMessage]:
    """One PeekedMessage, or one per batch record for a batched entry."""
    h = _lower(raw.headers)
    message_id = h.get("x-pulsar-message-id", "")
    publish_time = h.get("x-pulsar-publish-time")
    event_time = h.get("x-pulsar-event-time")
    props = properties_from_headers(raw.headers)
    key = h.get("x-pulsar-partition-key")
    count_text = h.get("x-pulsar-num-batch-message")
    encrypted = h.get("x-pulsar-is-encrypted", "").lower() == "true"
    if count_text is not None and not encrypted:
        try:
            count = int(count_text)
            if not 0 < count <= MAX_BATCH_RECORDS:
                raise ValueError(count)
            records = decode_batch(raw.content, count)
        except (ValueError, CorruptPayload):
            records = None
        if records is not None:
            return [
                PeekedMessage(
                    message_id=message_id,
                    payload=r.payload,
                    properties=dict(r.properties),
                    publish_time=publish_time,
                    event_time=str(r.event_time) if r.event_time is not None else event_time,
                    batch_index=i,
                    key=r.partition_key,
                    headers=dict(raw.headers),
                )
                for i, r in enumerate(records)
            ]
    return [
        PeekedMessage(
            message_id=message_id,
            payload=raw.content,
            properties=props,
            publish_time=publish_time,
            event_time=event_time,
            key=key,
            headers=dict(raw.headers),
        )
    ]
