"""The publish hot path's hand-written encodings and scans agree with protobuf.

``send_receipt`` writes a SEND_RECEIPT frame by hand; it must be byte-identical to what
the protobuf runtime writes for every field combination and integer extreme.
``send_facts`` reads an entry's message count and marker type at the SEND (so dispatch
never parses the entry again); it must give what a full MessageMetadata parse gives."""

from __future__ import annotations

import itertools

import pytest

from magnetar.protocol import server_commands as sc
from magnetar.protocol.enums import CommandType
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.frames import decode_frame_body, frame_from_base, new_base_command, pb
from magnetar.protocol.payload import build_headers_and_payload, dispatch_facts, send_facts
from magnetar.protocol.wire import u64


def _reference(producer_id, sequence_id, ledger_id, entry_id, highest, partition):  # noqa: ANN001, ANN202
    base, cmd = new_base_command(CommandType.SEND_RECEIPT)
    cmd.producer_id = producer_id
    cmd.sequence_id = sequence_id
    cmd.message_id.ledgerId = u64(ledger_id)
    cmd.message_id.entryId = u64(entry_id)
    if partition != -1:
        cmd.message_id.partition = partition
    if highest is not None:
        cmd.highest_sequence_id = highest
    return frame_from_base(base)


def test_send_receipt_equals_protobuf_for_every_combination():
    cases = itertools.product(
        [0, 1, 127, 128, 2**40, 2**64 - 1],  # producer id
        [0, 5, 16_384, 2**64 - 1],  # sequence id
        [-1, 0, 300, 2**62],  # ledger id
        [-1, 0, 99_999, 2**63 - 1],  # entry id
        [None, 0, 7, 2**64 - 1],  # highest sequence id
        [-1, 0, 200, 2**31 - 1],  # partition
    )
    n = 0
    for args in cases:
        assert sc.send_receipt(*args) == _reference(*args), args
        n += 1
    assert n == 6 * 4 * 4 * 4 * 4 * 4


def test_send_receipt_decodes_as_the_client_reads_it():
    frame = decode_frame_body(memoryview(sc.send_receipt(3, 9, 12, 34, 11))[4:])
    assert frame.type is CommandType.SEND_RECEIPT
    r = frame.command
    assert (r.producer_id, r.sequence_id, r.message_id.ledgerId, r.message_id.entryId) == (3, 9, 12, 34)
    assert r.highest_sequence_id == 11 and not r.message_id.HasField("partition")


def _meta(**fields):  # noqa: ANN003, ANN202
    m = pb.MessageMetadata()
    m.producer_name = fields.pop("producer_name", "p")
    m.sequence_id = fields.pop("sequence_id", 1)
    m.publish_time = fields.pop("publish_time", 1_700_000_000_000)
    for k, v in fields.items():
        if k == "properties":
            for key, value in v.items():
                kv = m.properties.add()
                kv.key, kv.value = key, value
        else:
            setattr(m, k, v)
    return m


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"num_messages_in_batch": 1},
        {"num_messages_in_batch": 100},
        {"marker_type": 10},
        {"marker_type": 0},
        {"num_messages_in_batch": 3, "marker_type": 20},
        # the scanned tag bytes (0x58 'X', 0xa0 0x01) inside strings, numbers and bytes:
        {"producer_name": "XXX-\xa0"},
        {"properties": {"X": "X\xa0\x01"}},
        {"sequence_id": 0x58, "publish_time": 0xA0 | (0x01 << 8)},
        {"partition_key": "X", "ordering_key": b"\xa0\x01X"},
        {"deliver_at_time": 0x58, "event_time": 0x58},
        {"uncompressed_size": 0x58, "replicated_from": "X"},
    ],
)
def test_send_facts_equal_a_full_parse(fields):
    data = build_headers_and_payload(_meta(**fields), b"X\xa0\x01" * 50)
    ok, n, marker = send_facts(data)
    assert ok and (n, marker) == dispatch_facts(data)
    bad = data[:-1] + bytes([data[-1] ^ 1])  # the payload's last byte: the CRC no longer matches
    assert send_facts(bad) == (False, n, marker)


def test_send_facts_of_an_unparseable_metadata_are_what_dispatch_falls_back_to():
    good = build_headers_and_payload(_meta(num_messages_in_batch=2), b"x")
    bad = bytearray(good)
    bad[10] = 0x5F  # the metadata's first tag: field 11 with wire type 7 (no such type)
    with pytest.raises(CorruptPayload):
        dispatch_facts(bytes(bad))  # dispatch counts such an entry as one message
    assert send_facts(bytes(bad))[1:] == (1, None)


def test_send_facts_refuse_a_truncated_header_as_the_checksum_check_did():
    with pytest.raises(CorruptPayload):
        send_facts(b"\x0e\x01\x00")


def test_send_facts_take_every_header_shape_the_general_parser_takes():
    from magnetar.protocol.payload import add_broker_entry_metadata, verify_checksum

    meta = _meta(num_messages_in_batch=3)
    with_crc = build_headers_and_payload(meta, b"payload")
    no_crc = with_crc[:0] + with_crc[6:]  # [metadata size][metadata][payload]: no checksum block
    with_bem = add_broker_entry_metadata(with_crc, broker_timestamp=5, index=9)
    for data in (with_crc, no_crc, with_bem):
        ok, n, marker = send_facts(data)
        assert ok is verify_checksum(data) is True
        assert (n, marker) == dispatch_facts(data) == (3, None)
    short = with_crc[:12]  # the metadata size says more than there is
    with pytest.raises(CorruptPayload):
        send_facts(short)
    with pytest.raises(CorruptPayload):
        verify_checksum(short)
