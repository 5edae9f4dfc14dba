"""Replicated-subscription markers: round trips, the entry they make, bad input."""

from __future__ import annotations

import pytest

from magnetar.protocol import markers as mk
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import parse_headers_and_payload


@pytest.mark.parametrize(
    "marker",
    [
        mk.SnapshotRequest("id-1", "A"),
        mk.SnapshotResponse("id-1", "B", (12, 345)),
        mk.Snapshot("id-1", (7, 8), {"B": (12, 345), "C": (1, 0)}),
        mk.Update("sub", {"B": (12, 345)}),
        mk.Update("sub", {}),
    ],
)
def test_round_trip(marker) -> None:  # noqa: ANN001
    marker_type, payload = mk.encode(marker)
    assert marker_type in mk.REPLICATED_SUBSCRIPTION_MARKERS
    assert mk.decode(marker_type, payload) == marker


def test_wire_format_is_pulsars() -> None:
    # ReplicatedSubscriptionsSnapshotRequest{snapshot_id="x" (1), source_cluster="A" (2)}
    assert mk.encode(mk.SnapshotRequest("x", "A")) == (10, b"\x0a\x01x\x12\x01A")
    # ClusterMessageId{cluster="B", message_id{ledger_id=1, entry_id=2}} inside a response
    assert (
        mk.encode(mk.SnapshotResponse("x", "B", (1, 2)))[1]
        == b"\x0a\x01x\x12\x09\x0a\x01B\x12\x04\x08\x01\x10\x02"
    )


def test_marker_entry_metadata() -> None:
    data = mk.marker_entry(
        mk.SnapshotRequest("x", "A"), producer_name="pulsar.marker.A", sequence_id=5,
        publish_time_ms=1000, replicate_to=["B"],
    )  # fmt: skip
    parsed = parse_headers_and_payload(data)
    assert parsed.metadata.marker_type == mk.SNAPSHOT_REQUEST
    assert list(parsed.metadata.replicate_to) == ["B"]
    assert mk.decode(parsed.metadata.marker_type, parsed.payload) == mk.SnapshotRequest("x", "A")


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(CorruptPayload):
        mk.decode(mk.UPDATE, b"\x0a\x05ab")  # truncated string
    with pytest.raises(CorruptPayload):
        mk.decode(20, b"")  # a transaction marker is not ours
