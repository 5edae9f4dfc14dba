"""Transaction markers: the entries a topic's transaction buffer writes on commit and abort.

Theory of operation: a marker is an ordinary stored entry (magic, CRC, MessageMetadata,
empty payload) whose metadata carries ``marker_type`` (Pulsar's MarkerType numbers from
PulsarMarkers.proto: TXN_COMMITTING = 20, TXN_COMMIT = 21, TXN_ABORT = 22) and the
transaction id.  Dispatchers never deliver markers; a recovering buffer reads them back
to learn which transactions ended how.  :func:`txn_of` reads the transaction id of any
stored entry's metadata (None for a non-transactional one).
"""

from __future__ import annotations

from typing import Any

from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

TXN_COMMITTING = 20
TXN_COMMIT = 21
TXN_ABORT = 22
TXN_MARKER_TYPES = frozenset({TXN_COMMITTING, TXN_COMMIT, TXN_ABORT})
MARKER_PRODUCER_NAME = "pulsar.txn.marker"


def txn_marker(commit: bool, most: int, least: int, sequence_id: int, publish_time_ms: int) -> bytes:
    """The stored bytes of a commit (``commit``) or abort marker for transaction (most, least)."""
    meta = new_message_metadata(
        producer_name=MARKER_PRODUCER_NAME,
        sequence_id=sequence_id,
        publish_time=publish_time_ms,
        marker_type=TXN_COMMIT if commit else TXN_ABORT,
        txnid_most_bits=most,
        txnid_least_bits=least,
    )
    return build_headers_and_payload(meta, b"")


def marker_type(meta: Any) -> int | None:
    return meta.marker_type if meta.HasField("marker_type") else None


def txn_of(meta: Any) -> tuple[int, int] | None:
    if meta.HasField("txnid_most_bits") and meta.HasField("txnid_least_bits"):
        return meta.txnid_most_bits, meta.txnid_least_bits
    return None
