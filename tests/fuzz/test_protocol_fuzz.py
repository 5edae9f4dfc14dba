"""Fuzz the server side of the codec with random and mutated frames.

Each case is a fresh ``ServerConnection`` fed either pure noise or mutations of real frames:
frames captured from the official pulsar-client 3.13.0 (``corpus/official_client_3.13.0.bin``)
and frames from our own builders. Half of the cases complete the handshake first, so mutated
commands reach the CONNECTED-state paths. Bytes arrive in random chunk sizes. For every
SEND that decodes, the broker-side payload path (CRC, metadata, decompression, batch split) runs
too. The only exceptions allowed are ``ProtocolError`` subclasses, and the connection never
buffers more than its frame limit.

Default run: 100,000 cases (a fixed seed, a few seconds). ``-m slow`` runs 1,000,000 more.
"""

from __future__ import annotations

import pathlib
import random
import struct

import pytest

from magnetar.protocol import commands as c
from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.compression import compress, decompress
from magnetar.protocol.connection import CommandReceived, ConnectionClosed, ConnectRequested, ServerConnection
from magnetar.protocol.enums import AckType, CommandType, CompressionType, SubType
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import (
    build_headers_and_payload,
    new_message_metadata,
    parse_headers_and_payload,
)

CORPUS = pathlib.Path(__file__).parent / "corpus" / "official_client_3.13.0.bin"
MAX_MESSAGE_SIZE = 32 * 1024  # small, so size-prefix mutations often cross the limit
_U32 = struct.Struct(">I")


def split_frames(blob: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(blob):
        size = _U32.unpack_from(blob, pos)[0] + 4
        out.append(blob[pos : pos + size])
        pos += size
    return out


def _builder_frames() -> list[bytes]:
    frames = []
    for codec in CompressionType:
        records = encode_batch([SingleMessage(b"r%d" % i, {"k": "v"}, partition_key="pk") for i in range(3)])
        body = compress(codec, records)
        meta = new_message_metadata(
            producer_name="fuzz",
            sequence_id=1,
            publish_time=2,
            compression=int(codec),
            uncompressed_size=len(records),
            num_messages_in_batch=3,
        )
        frames.append(c.send(0, 1, build_headers_and_payload(meta, body), num_messages=3))
    single = build_headers_and_payload(
        new_message_metadata(producer_name="f", sequence_id=0, publish_time=1), b"x"
    )
    frames += [
        c.send(0, 0, single),
        c.subscribe("persistent://public/default/t", "sub", SubType.Key_Shared, 1, 2, "c"),
        c.flow(1, 1000),
        c.ack(1, AckType.Individual, [MessageId(7, 0), MessageId(7, 1, ack_set=(30,))]),
        c.lookup("t", 3),
        c.partitioned_metadata("t", 4),
        c.producer("t", 0, 5, "p"),
        c.seek(1, 6, MessageId(-1, -1)),
        c.redeliver_unacknowledged(1, [MessageId(7, 2)]),
        c.get_topics_of_namespace(7, "public/default"),
        c.get_schema(8, "t"),
        c.ping(),
        c.pong(),
        c.close_producer(0, 9),
        c.unsubscribe(1, 10),
    ]
    return frames


def corpus() -> tuple[bytes, list[bytes]]:
    official = split_frames(CORPUS.read_bytes())
    connect = next(f for f in official if f[8:10] == b"\x08\x02")
    others = [f for f in official if f[8:10] != b"\x08\x02"]
    return connect, others + _builder_frames()


def mutate(rng: random.Random, frame: bytes, pool: list[bytes]) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(10)
        if op == 0 and data:  # flip bits
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:  # random byte
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 2:  # insert noise
            i = rng.randint(0, len(data))
            data[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 3 and data:  # delete a range
            i = rng.randrange(len(data))
            del data[i : i + rng.randint(1, 16)]
        elif op == 4:  # truncate
            del data[rng.randint(0, len(data)) :]
        elif op == 5 and len(data) >= 4:  # tamper with total_size
            _U32.pack_into(
                data,
                0,
                rng.choice([0, 1, 3, 4, rng.randrange(1 << 32), max(0, len(data) + rng.randint(-8, 8))]),
            )
        elif op == 6 and len(data) >= 8:  # tamper with cmd_size
            _U32.pack_into(
                data, 4, rng.choice([0, 1, rng.randrange(1 << 32), max(0, len(data) - rng.randint(0, 16))])
            )
        elif op == 7:  # splice with another real frame
            other = rng.choice(pool)
            data = data[: rng.randint(0, len(data))] + bytearray(other[rng.randint(0, len(other)) :])
        elif op == 8 and len(data) > 12:  # fix up sizes after editing the body (keeps it framed)
            _U32.pack_into(data, 0, len(data) - 4)
        elif op == 9:  # duplicate
            data = data + data
    return bytes(data)


def _check_payload(frame) -> None:
    """The broker-side payload path on a SEND: only ProtocolError may escape."""
    parsed = parse_headers_and_payload(frame.headers_and_payload)
    meta = parsed.metadata
    size = meta.uncompressed_size if meta.HasField("uncompressed_size") else len(parsed.payload)
    body = decompress(meta.compression, parsed.payload, size, max_uncompressed_size=1 << 20)
    if meta.HasField("num_messages_in_batch"):
        decode_batch(body, meta.num_messages_in_batch)


def _drain(conn: ServerConnection) -> None:
    while (event := conn.next_event()) is not None:
        if isinstance(event, ConnectRequested):
            conn.accept_connect()
        elif isinstance(event, CommandReceived) and event.frame.type is CommandType.SEND:
            try:
                _check_payload(event.frame)
            except ProtocolError:
                pass
        elif isinstance(event, ConnectionClosed):
            return


def run_case(rng: random.Random, connect: bytes, pool: list[bytes]) -> str:
    conn = ServerConnection(max_message_size=MAX_MESSAGE_SIZE)
    limit = conn.max_frame_size
    kind = rng.randrange(10)
    if kind == 0:
        payload = rng.randbytes(rng.randint(0, 64))
    elif kind == 1:
        payload = mutate(rng, connect, pool)
    else:
        frames = [mutate(rng, rng.choice(pool), pool) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            frames.insert(rng.randint(0, len(frames)), rng.choice(pool))  # some intact frames too
        payload = b"".join(frames)
    handshake = kind >= 2 and rng.random() < 0.5
    stream = (connect + payload) if handshake else payload
    try:
        pos = 0
        while pos < len(stream):
            step = rng.choice([1, 7, 64, 1024, len(stream)])
            conn.receive_data(stream[pos : pos + step])
            pos += step
            _drain(conn)
            assert conn.buffered_bytes <= limit, f"buffered {conn.buffered_bytes} > {limit}"
        conn.receive_data(b"")
        _drain(conn)
    except ProtocolError:
        return "rejected"
    return "accepted"


def fuzz(seed: int, cases: int) -> dict[str, int]:
    rng = random.Random(seed)
    connect, pool = corpus()
    outcomes = {"rejected": 0, "accepted": 0}
    for _ in range(cases):
        outcomes[run_case(rng, connect, pool)] += 1
    return outcomes


def test_corpus_is_real_official_client_traffic():
    connect, _pool = corpus()
    frames = split_frames(CORPUS.read_bytes())
    assert len(frames) >= 10
    conn = ServerConnection()
    conn.receive_data(CORPUS.read_bytes()[: len(frames[0])])
    event = conn.next_event()
    assert isinstance(event, ConnectRequested) and event.client_version == "Pulsar-CPP-v4.2.0"
    assert connect == frames[0]


def test_fuzz_100k_frames_only_protocol_errors():
    outcomes = fuzz(seed=20260530, cases=100_000)
    assert sum(outcomes.values()) == 100_000
    # Both paths must be exercised: garbage rejected, and some mutations still accepted.
    assert outcomes["rejected"] > 10_000 and outcomes["accepted"] > 1_000


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_fuzz_slow_1m_frames(seed):
    outcomes = fuzz(seed=seed, cases=200_000)
    assert sum(outcomes.values()) == 200_000


def _session_events(chunks: list[bytes]) -> list:
    conn = ServerConnection()
    out = []
    for chunk in chunks:
        conn.receive_data(chunk)
        while (event := conn.next_event()) is not None:
            out.append(event)
            if isinstance(event, ConnectRequested):
                conn.accept_connect()
    return out


def test_official_client_sessions_split_invariance():
    frames = split_frames(CORPUS.read_bytes())
    starts = [i for i, f in enumerate(frames) if f[8:10] == b"\x08\x02"]
    assert len(starts) == 2
    for a, b in zip(starts, [*starts[1:], len(frames)], strict=True):
        session = b"".join(frames[a:b])
        whole = _session_events([session])
        assert isinstance(whole[0], ConnectRequested) and len(whole) == b - a
        assert _session_events([session[i : i + 1] for i in range(len(session))]) == whole
