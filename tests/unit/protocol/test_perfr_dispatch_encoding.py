"""The dispatch hot path's hand-written encodings agree with protobuf.

``message_command_bytes`` writes a MESSAGE BaseCommand by hand and ``dispatch_facts``
reads an entry's message count and marker type without the required-field check; both
must give what the protobuf runtime gives, for every field combination and for the
extremes of every integer (negative int32/int64, the top of uint64)."""

from __future__ import annotations

import itertools

import pytest

from magnetar.protocol import server_commands as sc
from magnetar.protocol.enums import CommandType
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.frames import new_base_command, pb, serialize_base
from magnetar.protocol.payload import build_headers_and_payload, dispatch_facts, num_messages, peek_metadata
from magnetar.protocol.wire import u64


def _reference(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, epoch):  # noqa: ANN001, ANN202
    base, cmd = new_base_command(CommandType.MESSAGE)
    cmd.consumer_id = consumer_id
    cmd.message_id.ledgerId = u64(ledger_id)
    cmd.message_id.entryId = u64(entry_id)
    if partition != -1:
        cmd.message_id.partition = partition
    if redelivery_count:
        cmd.redelivery_count = redelivery_count
    if ack_set:
        cmd.ack_set.extend(ack_set)
    if epoch is not None:
        cmd.consumer_epoch = epoch
    return serialize_base(base)


def test_message_command_bytes_equal_protobuf_for_every_combination():
    cases = itertools.product(
        [0, 1, 127, 128, 2**40, 2**64 - 1],  # consumer id
        [-1, 0, 300, 2**62],  # ledger id
        [-1, 0, 99_999, 2**63 - 1],  # entry id
        [-1, 0, 200],  # partition
        [0, 1, 1000],  # redelivery count
        [None, [], [0], [-1, 5, 2**63 - 1, -(2**63)]],  # ack set
        [None, 0, 7],  # consumer epoch
    )
    n = 0
    for args in cases:
        assert sc.message_command_bytes(*args) == _reference(*args), args
        n += 1
    assert n == 6 * 4 * 4 * 3 * 3 * 4 * 3


def test_message_command_decodes_as_the_client_reads_it():
    base = pb.BaseCommand()
    base.ParseFromString(sc.message_command_bytes(7, 12, 34, 2, 3, [5]))
    assert base.type == CommandType.MESSAGE
    m = base.message
    assert (m.consumer_id, m.message_id.ledgerId, m.message_id.entryId, m.message_id.partition) == (
        7,
        12,
        34,
        2,
    )
    assert m.redelivery_count == 3 and list(m.ack_set) == [5]


def _entry(**fields) -> bytes:  # noqa: ANN003
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, **fields)
    return build_headers_and_payload(meta, b"x" * 100)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"num_messages_in_batch": 1},
        {"num_messages_in_batch": 250},
        {"marker_type": 10},
        {"marker_type": 0},
    ],
)
def test_dispatch_facts_match_the_full_parse(fields):
    data = _entry(**fields)
    meta = peek_metadata(data)
    marker = meta.marker_type if meta.HasField("marker_type") else None
    assert dispatch_facts(data) == (num_messages(meta), marker)


def test_dispatch_facts_refuse_garbage():
    with pytest.raises(CorruptPayload):
        dispatch_facts(b"\x0e\x01\x00\x00\x00\x00\x00\x00\x00\x05\xff\xff\xff\xff\xff")
