"""Replicated-subscription markers: Pulsar's PulsarMarkers.proto messages, sans I/O.

Theory of operation: a marker is an entry of the topic whose MessageMetadata
has ``marker_type`` set (10 snapshot request, 11 snapshot response, 12
snapshot, 13 update -- Pulsar's MarkerType values) and whose payload is one
of the messages below, in protobuf wire format (field numbers as in
PulsarMarkers.proto)::

    MarkersMessageIdData                   { 1 ledger_id: uint64, 2 entry_id: uint64 }
    ClusterMessageId                       { 1 cluster: string, 2 message_id: MarkersMessageIdData }
    ReplicatedSubscriptionsSnapshotRequest { 1 snapshot_id: string, 2 source_cluster: string }
    ReplicatedSubscriptionsSnapshotResponse{ 1 snapshot_id: string, 2 cluster: ClusterMessageId }
    ReplicatedSubscriptionsSnapshot        { 1 snapshot_id: string, 2 local_message_id: MarkersMessageIdData,
                                             3 clusters: repeated ClusterMessageId }
    ReplicatedSubscriptionsUpdate          { 1 subscription_name: string, 2 clusters: repeated ClusterMessageId }

The messages are small and fixed, so they are written and read here with a
few lines of varint / length-delimited encoding instead of a generated
module.  :func:`marker_entry` wraps a payload in headers (magic, CRC32-C,
metadata) ready to be stored.  Bad input raises :class:`CorruptPayload`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

SNAPSHOT_REQUEST = 10
SNAPSHOT_RESPONSE = 11
SNAPSHOT = 12
UPDATE = 13
REPLICATED_SUBSCRIPTION_MARKERS = frozenset({SNAPSHOT_REQUEST, SNAPSHOT_RESPONSE, SNAPSHOT, UPDATE})

Pos = tuple[int, int]  # (ledger id, entry id)


@dataclass(frozen=True)
class SnapshotRequest:
    snapshot_id: str
    source_cluster: str


@dataclass(frozen=True)
class SnapshotResponse:
    snapshot_id: str
    cluster: str
    position: Pos


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: str
    local_position: Pos
    clusters: dict[str, Pos] = field(default_factory=dict)


@dataclass(frozen=True)
class Update:
    subscription: str
    clusters: dict[str, Pos] = field(default_factory=dict)


# ---------------------------------------------------------------- wire primitives
def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_varint(num: int, value: int) -> bytes:
    return _varint(num << 3) + _varint(value)


def _field_bytes(num: int, value: bytes) -> bytes:
    return _varint((num << 3) | 2) + _varint(len(value)) + value


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    i, n = 0, len(buf)

    def read_varint() -> int:
        nonlocal i
        shift = result = 0
        while True:
            if i >= n or shift > 63:
                raise CorruptPayload("truncated varint in a marker")
            b = buf[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while i < n:
        key = read_varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            out.append((num, read_varint()))
        elif wire == 2:
            size = read_varint()
            if i + size > n:
                raise CorruptPayload("truncated field in a marker")
            out.append((num, bytes(buf[i : i + size])))
            i += size
        else:
            raise CorruptPayload(f"unexpected wire type {wire} in a marker")
    return out


def _pos(p: Pos) -> bytes:
    return _field_varint(1, p[0]) + _field_varint(2, p[1])


def _read_pos(buf: bytes) -> Pos:
    d = {k: v for k, v in _fields(buf)}
    return int(d.get(1, 0)), int(d.get(2, 0))  # type: ignore[arg-type]


def _cluster_pos(cluster: str, p: Pos) -> bytes:
    return _field_bytes(1, cluster.encode()) + _field_bytes(2, _pos(p))


def _read_cluster_pos(buf: bytes) -> tuple[str, Pos]:
    cluster, pos = "", (0, 0)
    for num, value in _fields(buf):
        if num == 1 and isinstance(value, bytes):
            cluster = value.decode()
        elif num == 2 and isinstance(value, bytes):
            pos = _read_pos(value)
    return cluster, pos


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise CorruptPayload("expected a string field in a marker")
    return value.decode()


# ---------------------------------------------------------------- messages
def encode(marker: SnapshotRequest | SnapshotResponse | Snapshot | Update) -> tuple[int, bytes]:
    """(marker type, payload)."""
    if isinstance(marker, SnapshotRequest):
        body = _field_bytes(1, marker.snapshot_id.encode()) + _field_bytes(2, marker.source_cluster.encode())
        return SNAPSHOT_REQUEST, body
    if isinstance(marker, SnapshotResponse):
        body = _field_bytes(1, marker.snapshot_id.encode()) + _field_bytes(
            2, _cluster_pos(marker.cluster, marker.position)
        )
        return SNAPSHOT_RESPONSE, body
    if isinstance(marker, Snapshot):
        body = _field_bytes(1, marker.snapshot_id.encode()) + _field_bytes(2, _pos(marker.local_position))
        for c, p in marker.clusters.items():
            body += _field_bytes(3, _cluster_pos(c, p))
        return SNAPSHOT, body
    body = _field_bytes(1, marker.subscription.encode())
    for c, p in marker.clusters.items():
        body += _field_bytes(2, _cluster_pos(c, p))
    return UPDATE, body


def decode(marker_type: int, payload: bytes) -> SnapshotRequest | SnapshotResponse | Snapshot | Update:
    fields = _fields(payload)
    first = {num: value for num, value in fields}
    if marker_type == SNAPSHOT_REQUEST:
        return SnapshotRequest(_text(first.get(1, b"")), _text(first.get(2, b"")))
    if marker_type == SNAPSHOT_RESPONSE:
        cluster, pos = _read_cluster_pos(first.get(2, b""))  # type: ignore[arg-type]
        return SnapshotResponse(_text(first.get(1, b"")), cluster, pos)
    if marker_type == SNAPSHOT:
        clusters = dict(_read_cluster_pos(v) for n, v in fields if n == 3 and isinstance(v, bytes))
        local = _read_pos(first[2]) if isinstance(first.get(2), bytes) else (0, 0)  # type: ignore[arg-type]
        return Snapshot(_text(first.get(1, b"")), local, clusters)
    if marker_type == UPDATE:
        clusters = dict(_read_cluster_pos(v) for n, v in fields if n == 2 and isinstance(v, bytes))
        return Update(_text(first.get(1, b"")), clusters)
    raise CorruptPayload(f"marker type {marker_type} is not a replicated-subscription marker")


def marker_entry(
    marker: SnapshotRequest | SnapshotResponse | Snapshot | Update,
    *,
    producer_name: str,
    sequence_id: int,
    publish_time_ms: int,
    replicate_to: list[str],
) -> bytes:
    """Headers-and-payload of a marker entry (``replicate_to`` names the clusters it goes to;
    a local-only marker names none and is never replicated)."""
    marker_type, payload = encode(marker)
    meta = new_message_metadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time=publish_time_ms,
        replicate_to=replicate_to or None,
        marker_type=marker_type,
    )
    return build_headers_and_payload(meta, payload)
