"""Frame codec: encode/decode, size limits before buffering, split invariance, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType
from magnetar.protocol.errors import FrameTooLarge, LocalProtocolError, RemoteProtocolError
from magnetar.protocol.frames import (
    FrameDecoder,
    encode_command,
    encode_payload_command,
    frame_limit_for,
    peek_command_type,
)
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata


def _decode_all(decoder: FrameDecoder) -> list:
    out = []
    while (frame := decoder.next_frame()) is not None:
        out.append(frame)
    return out


def _sample_frames() -> list[bytes]:
    meta = new_message_metadata(producer_name="p", sequence_id=1, publish_time=1000)
    hp = build_headers_and_payload(meta, b"hello")
    return [
        commands.connect(client_version="Pulsar-CPP-v4.2.0"),
        commands.ping(),
        commands.send(1, 2, hp),
        commands.flow(1, 1000),
        commands.message(3, 7, 0, -1, hp),
        commands.error(5, 3, ""),
    ]


def test_ping_frame_matches_observed_size():
    # Observed with pulsar-client 3.13.0: total_size 9, cmd_size 5.
    frame = commands.ping()
    assert struct.unpack(">II", frame[:8]) == (9, 5)


def test_round_trip_simple_and_payload_frames():
    frames = _sample_frames()
    decoder = FrameDecoder(1 << 20)
    decoder.feed(b"".join(frames))
    decoded = _decode_all(decoder)
    assert [f.type for f in decoded] == [
        CommandType.CONNECT,
        CommandType.PING,
        CommandType.SEND,
        CommandType.FLOW,
        CommandType.MESSAGE,
        CommandType.ERROR,
    ]
    assert decoded[2].headers_and_payload == frames[2][-len(decoded[2].headers_and_payload) :]
    assert decoded[2].headers_and_payload.startswith(b"\x0e\x01")
    assert decoded[3].command.messagePermits == 1000
    assert decoded[3].headers_and_payload is None
    assert [f.size for f in decoded] == [len(f) for f in frames]
    assert decoder.buffered_bytes == 0


def test_byte_at_a_time_gives_same_frames():
    data = b"".join(_sample_frames())
    whole = FrameDecoder(1 << 20)
    whole.feed(data)
    expected = [(f.type, f.base.SerializeToString(), f.headers_and_payload) for f in _decode_all(whole)]
    dribble = FrameDecoder(1 << 20)
    got = []
    for i in range(len(data)):
        dribble.feed(data[i : i + 1])
        got.extend((f.type, f.base.SerializeToString(), f.headers_and_payload) for f in _decode_all(dribble))
    assert got == expected


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_split_invariance_random_cuts(data):
    blob = b"".join(_sample_frames())
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=20)))
    decoder = FrameDecoder(1 << 20)
    got = []
    prev = 0
    for cut in [*cuts, len(blob)]:
        decoder.feed(blob[prev:cut])
        prev = cut
        got.extend(f.type for f in _decode_all(decoder))
    assert len(got) == 6


def test_oversized_frame_rejected_from_prefix_alone():
    decoder = FrameDecoder(1024)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(struct.pack(">I", 1021))  # 1021 + 4 > 1024
    assert info.value.frame_size == 1025
    assert decoder.buffered_bytes == 4
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()  # poisoned


def test_limit_counts_total_size_plus_four():
    limit = 64
    body = encode_command(CommandType.FLOW, consumer_id=1, messagePermits=1)
    padded_total = limit - 4
    frame = (
        struct.pack(">II", padded_total, len(body) - 8) + body[8:] + b"\0" * (padded_total - (len(body) - 4))
    )
    decoder = FrameDecoder(limit)
    decoder.feed(frame)
    assert decoder.next_frame().type is CommandType.FLOW


def test_frame_limit_for_matches_pulsar():
    assert frame_limit_for(5 * 1024 * 1024) == 5 * 1024 * 1024 + 10240


@pytest.mark.parametrize(
    "blob",
    [
        struct.pack(">II", 2, 0),  # total_size too small for cmd_size
        struct.pack(">II", 4, 0),  # cmd_size 0
        struct.pack(">II", 8, 10) + b"\0" * 4,  # cmd_size larger than the frame
        struct.pack(">II", 6, 2) + b"\x08\x01",  # type 1 does not exist
        struct.pack(">II", 7, 3) + b"\xff\xff\xff",  # garbage protobuf
        struct.pack(">II", 6, 2) + b"\x08\x0e",  # ERROR without its sub-message
    ],
)
def test_garbage_raises_remote_protocol_error(blob):
    decoder = FrameDecoder(1024)
    decoder.feed(blob)
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def test_missing_required_field_is_remote_error():
    # CommandError with request_id and error but no message (observed to break cpp).
    inner = b"\x08\x01\x10\x00"
    cmd = b"\x08\x0e\x72" + bytes([len(inner)]) + inner
    decoder = FrameDecoder(1024)
    decoder.feed(struct.pack(">II", len(cmd) + 4, len(cmd)) + cmd)
    with pytest.raises(RemoteProtocolError, match="required"):
        decoder.next_frame()


def test_encoding_without_required_field_is_local_error():
    with pytest.raises(LocalProtocolError):
        encode_command(CommandType.ERROR, request_id=1)
    with pytest.raises(LocalProtocolError):
        encode_payload_command(CommandType.FLOW, b"", consumer_id=1, messagePermits=1)


def test_peek_command_type():
    assert peek_command_type(commands.pong()) is CommandType.PONG


u64 = st.integers(0, 2**64 - 1)


@settings(max_examples=150, deadline=None)
@given(u64, u64, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=3000))
def test_payload_frames_round_trip(consumer_id, sequence_id, ledger_id, entry_id, body):
    meta = new_message_metadata(producer_name="p", sequence_id=sequence_id, publish_time=1)
    hp = build_headers_and_payload(meta, body)
    decoder = FrameDecoder(1 << 20)
    decoder.feed(
        commands.message(consumer_id, ledger_id, entry_id, -1, hp) + commands.send(7, sequence_id, hp)
    )
    msg, send = decoder.next_frame(), decoder.next_frame()
    assert msg.command.consumer_id == consumer_id
    assert msg.command.message_id.ledgerId == ledger_id % 2**64
    assert msg.command.message_id.entryId == entry_id % 2**64
    assert send.command.sequence_id == sequence_id
    assert msg.headers_and_payload == send.headers_and_payload == hp


@settings(max_examples=150, deadline=None)
@given(u64, st.sampled_from(list(range(26))), st.text(max_size=200))
def test_simple_frames_round_trip(request_id, error, message):
    decoder = FrameDecoder(1 << 20)
    decoder.feed(commands.error(request_id, error, message) + commands.lookup(message, request_id))
    err, look = decoder.next_frame(), decoder.next_frame()
    assert (err.command.request_id, err.command.error, err.command.message) == (request_id, error, message)
    assert (look.command.topic, look.command.request_id) == (message, request_id)
    assert decoder.next_frame() is None and decoder.buffered_bytes == 0
