"""What a replicator sends and what it keeps: loops, message-level clusters, markers, metadata."""

from __future__ import annotations

from typing import Any

from magnetar.broker.replication.replicator import Replicator
from magnetar.protocol import markers as mk
from magnetar.protocol.payload import (
    build_headers_and_payload,
    new_message_metadata,
    parse_headers_and_payload,
)
from magnetar.testing.clock import ManualClock


def replicator(remote: str = "B") -> Replicator:
    async def url_of(_cluster: str) -> str | None:
        return None

    return Replicator(
        topic_name="persistent://t/n/x", local_cluster="A", remote_cluster=remote,
        cursor=None, url_of=url_of, clock=ManualClock(),  # type: ignore[arg-type]
    )  # fmt: skip


def entry(**meta: Any) -> bytes:
    md = new_message_metadata(producer_name="p-1", sequence_id=7, publish_time=1234, **meta)
    return build_headers_and_payload(md, b"payload")


def test_a_local_message_goes_with_its_metadata_and_replicated_from() -> None:
    out = replicator().outgoing(entry(partition_key="k", properties={"a": "1"}, event_time=99))
    assert out is not None
    data, n, publish = out
    parsed = parse_headers_and_payload(data)
    assert parsed.checksum_ok and parsed.payload == b"payload" and n == 1 and publish == 1234
    meta = parsed.metadata
    assert (meta.producer_name, meta.sequence_id, meta.publish_time) == ("p-1", 7, 1234)
    assert (meta.partition_key, meta.event_time, meta.replicated_from) == ("k", 99, "A")
    assert {kv.key: kv.value for kv in meta.properties} == {"a": "1"}


def test_a_batch_stays_one_batch() -> None:
    out = replicator().outgoing(entry(num_messages_in_batch=5))
    assert out is not None and out[1] == 5


def test_replicas_never_go_again() -> None:
    assert replicator().outgoing(entry(replicated_from="C")) is None


def test_message_level_replication_clusters() -> None:
    assert replicator("B").outgoing(entry(replicate_to=["A"])) is None
    assert replicator("B").outgoing(entry(replicate_to=["__local__"])) is None  # disable_replication
    assert replicator("B").outgoing(entry(replicate_to=["B", "C"])) is not None
    assert replicator("C").outgoing(entry(replicate_to=["B"])) is None


def test_markers_go_only_where_they_are_addressed() -> None:
    def marker(to: list[str]) -> bytes:
        return mk.marker_entry(mk.SnapshotRequest("s", "A"), producer_name="pulsar.marker.A",
                               sequence_id=1, publish_time_ms=1, replicate_to=to)  # fmt: skip

    assert replicator("B").outgoing(marker(["B"])) is not None
    assert replicator("C").outgoing(marker(["B"])) is None
    assert replicator("B").outgoing(marker([])) is None  # a local snapshot
    assert replicator("B").outgoing(entry(marker_type=20, replicate_to=["B"])) is None  # not ours
