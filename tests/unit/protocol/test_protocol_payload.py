"""Headers-and-payload, compression, batches and chunks: unit tests and Hypothesis round trips."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol import payload as pl
from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.chunks import ChunkAssembler, chunk_info, chunk_uuid, is_chunk, split_payload
from magnetar.protocol.compression import compress, decompress
from magnetar.protocol.enums import CompressionType
from magnetar.protocol.errors import ChecksumMismatch, CorruptPayload, UnsupportedCompression


def _meta(**kw):
    base = {"producer_name": "p", "sequence_id": 3, "publish_time": 1_700_000_000_000}
    base.update(kw)
    return pl.new_message_metadata(**base)


def test_crc32c_test_vector():
    assert pl.crc32c(b"123456789") == 0xE3069283
    assert pl.crc32c(b"6789", pl.crc32c(b"12345")) == 0xE3069283


def test_build_layout_and_checksum_range():
    meta = _meta(properties={"a": "b"})
    hp = pl.build_headers_and_payload(meta, b"payload")
    raw = meta.SerializeToString()
    assert hp[:2] == b"\x0e\x01"
    (crc,) = struct.unpack(">I", hp[2:6])
    assert hp[6:10] == struct.pack(">I", len(raw))
    assert hp[10 : 10 + len(raw)] == raw
    assert hp[10 + len(raw) :] == b"payload"
    # CRC covers [metadata_size][metadata][payload] exactly.
    assert crc == pl.crc32c(hp[6:])


def test_parse_round_trip_and_checksum_flags():
    hp = pl.build_headers_and_payload(_meta(), b"x" * 100)
    parsed = pl.parse_headers_and_payload(hp)
    assert parsed.checksum_ok and parsed.has_checksum
    assert parsed.payload == b"x" * 100
    assert parsed.metadata.sequence_id == 3
    assert parsed.metadata_bytes == _meta().SerializeToString()
    assert pl.verify_checksum(hp)
    assert pl.peek_metadata(hp) == parsed.metadata
    corrupt = hp[:-1] + b"y"
    assert pl.peek_metadata(corrupt) == parsed.metadata  # the metadata parses; the CRC does not match
    bad = pl.parse_headers_and_payload(corrupt)
    assert not bad.checksum_ok
    assert not pl.verify_checksum(corrupt)
    with pytest.raises(ChecksumMismatch) as info:
        bad.raise_for_checksum()
    assert info.value.hint == 9  # ServerError.ChecksumError
    assert pl.parse_headers_and_payload(corrupt, verify=False).checksum_ok


def test_no_magic_means_no_checksum():
    raw = _meta().SerializeToString()
    hp = struct.pack(">I", len(raw)) + raw + b"body"
    parsed = pl.parse_headers_and_payload(hp)
    assert not parsed.has_checksum and parsed.checksum_ok and parsed.payload == b"body"


def test_broker_entry_metadata_prefix():
    hp = pl.build_headers_and_payload(_meta(), b"body")
    with_bem = pl.add_broker_entry_metadata(hp, broker_timestamp=123, index=9)
    assert with_bem[:2] == b"\x0e\x02"
    parsed = pl.parse_headers_and_payload(with_bem)
    assert parsed.checksum_ok
    assert parsed.broker_entry_metadata.broker_timestamp == 123
    assert parsed.broker_entry_metadata.index == 9
    assert pl.strip_broker_entry_metadata(with_bem) == hp
    assert pl.strip_broker_entry_metadata(hp) is hp
    assert pl.peek_metadata(with_bem).producer_name == "p"


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x0e\x01\x00",
        b"\x0e\x01\x00\x00\x00\x00\x00\x00\x00\xff",
        b"\x0e\x02\x00\x00\x00\x09",
        b"\x00\x00\x00\x03\xff\xff\xff",
        b"\x00\x00\x00\x02\x08\x01",  # metadata lacking required fields
    ],
)
def test_corrupt_headers_raise_corrupt_payload(blob):
    with pytest.raises(CorruptPayload):
        pl.parse_headers_and_payload(blob)


def test_metadata_helpers():
    assert pl.num_messages(_meta()) == 1
    assert not pl.is_batch(_meta())
    batch = _meta(num_messages_in_batch=1)
    assert pl.is_batch(batch) and pl.num_messages(batch) == 1
    assert pl.num_messages(_meta(num_messages_in_batch=7)) == 7
    assert pl.deliver_at_time(_meta()) is None
    assert pl.deliver_at_time(_meta(deliver_at_time=55)) == 55
    assert pl.publish_time(_meta()) == 1_700_000_000_000
    assert pl.sticky_key(_meta()) == b"NONE_KEY"
    assert pl.sticky_key(_meta(partition_key="k")) == b"k"
    assert pl.sticky_key(_meta(partition_key="k", ordering_key=b"o")) == b"o"
    flagged = _meta(partition_key=base64.b64encode(b"\x00\x01").decode())
    flagged.partition_key_b64_encoded = True
    assert pl.sticky_key(flagged) == b"\x00\x01"
    assert pl.properties(_meta(properties={"x": "1"})) == {"x": "1"}


metadata_strategy = st.builds(
    lambda seq, t, props, key, n: _meta(
        sequence_id=seq, publish_time=t, properties=props, partition_key=key, num_messages_in_batch=n
    ),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    st.none() | st.text(max_size=10),
    st.none() | st.integers(1, 1000),
)


@settings(max_examples=150, deadline=None)
@given(metadata_strategy, st.binary(max_size=2000))
def test_headers_and_payload_round_trip(meta, body):
    hp = pl.build_headers_and_payload(meta, body)
    parsed = pl.parse_headers_and_payload(hp)
    assert parsed.checksum_ok
    assert parsed.payload == body
    assert parsed.metadata == meta
    assert pl.peek_metadata(hp) == meta


# --------------------------------------------------------------------------- compression


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("data", [b"", b"a", b"pulsar " * 500, bytes(range(256)) * 4])
def test_compression_round_trip(codec, data):
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    if codec is not CompressionType.NONE and len(data) > 1000:
        assert len(packed) < len(data)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(CompressionType)), st.binary(max_size=3000))
def test_compression_round_trip_property(codec, data):
    assert decompress(codec, compress(codec, data), len(data)) == data


def test_lz4_is_a_raw_block_and_snappy_is_raw():
    import cramjam
    import lz4.block

    data = b"hello hello hello hello"
    assert lz4.block.decompress(compress(CompressionType.LZ4, data), uncompressed_size=len(data)) == data
    assert bytes(cramjam.snappy.decompress_raw(compress(CompressionType.SNAPPY, data))) == data
    assert compress(CompressionType.ZLIB, data)[:1] == b"\x78"  # zlib header
    assert compress(CompressionType.ZSTD, data)[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
def test_decompress_wrong_size_or_garbage_is_corrupt(codec):
    data = b"abc" * 100
    packed = compress(codec, data)
    with pytest.raises(CorruptPayload):
        decompress(codec, packed, len(data) - 1)
    with pytest.raises(CorruptPayload):
        decompress(codec, b"\xff" * 20, 300)


def test_decompress_bounds():
    with pytest.raises(CorruptPayload):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, b"x"), 1 << 40)
    with pytest.raises(UnsupportedCompression):
        decompress(9, b"", 0)
    with pytest.raises(UnsupportedCompression):
        compress(9, b"")


# --------------------------------------------------------------------------- batches


def test_batch_matches_observed_bytes():
    # pulsar-client 3.13.0, three records b"b-0", b"b-1", b"b-2" (pulsar-protocol.md section 7.2).
    records = [SingleMessage(f"b-{i}".encode(), sequence_id=i) for i in range(3)]
    blob = encode_batch(records)
    assert blob[:11] == bytes.fromhex("00000004 1803 4000 622d30".replace(" ", ""))
    assert decode_batch(blob, 3) == records


single_message = st.builds(
    SingleMessage,
    payload=st.binary(max_size=200),
    properties=st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    partition_key=st.none() | st.text(max_size=8),
    ordering_key=st.none() | st.binary(max_size=8),
    event_time=st.none() | st.integers(1, 2**63),
    sequence_id=st.none() | st.integers(0, 2**64 - 1),
    null_value=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(single_message, max_size=20))
def test_batch_round_trip(records):
    assert decode_batch(encode_batch(records), len(records)) == records


def test_batch_corruption():
    blob = encode_batch([SingleMessage(b"abc"), SingleMessage(b"def")])
    with pytest.raises(CorruptPayload):
        decode_batch(blob, 3)  # too few records
    with pytest.raises(CorruptPayload):
        decode_batch(blob, 1)  # trailing bytes
    with pytest.raises(CorruptPayload):
        decode_batch(blob[:-1], 2)
    with pytest.raises(CorruptPayload):
        decode_batch(b"\x00\x00\x00\x02\x18\x7f", 1)  # payload_size 127 > remaining
    with pytest.raises(CorruptPayload):
        decode_batch(b"\x00\x00\x00\x00", 1)  # no payload_size
    with pytest.raises(CorruptPayload):
        decode_batch(b"", -1)


# --------------------------------------------------------------------------- chunks


def _chunks(payload: bytes, size: int, name="p", seq=5):
    parts = split_payload(payload, size)
    return [
        (
            _meta(
                producer_name=name,
                sequence_id=seq,
                uuid=chunk_uuid(name, seq),
                num_chunks_from_msg=len(parts),
                total_chunk_msg_size=len(payload),
                chunk_id=i,
            ),
            part,
        )
        for i, part in enumerate(parts)
    ]


def test_chunk_helpers_and_reassembly():
    payload = bytes(range(256)) * 10
    chunks = _chunks(payload, 1000)
    assert len(chunks) == 3
    assert is_chunk(chunks[0][0]) and not is_chunk(_meta())
    info = chunk_info(chunks[1][0])
    assert (info.uuid, info.chunk_id, info.num_chunks, info.total_size) == ("p-5", 1, 3, 2560)
    asm = ChunkAssembler()
    results = [asm.add(m, p, now_ms=0) for m, p in chunks]
    assert results[:2] == [None, None] and results[2] == payload
    assert len(asm) == 0


def test_chunk_assembler_bounds_and_expiry():
    asm = ChunkAssembler(max_pending=2, expire_ms=1000)
    for seq in range(3):
        asm.add(*_chunks(b"x" * 20, 10, seq=seq)[0], now_ms=0)
    assert len(asm) == 2 and asm.dropped == 1
    assert asm.expire(now_ms=1000) == 2
    # Out-of-order chunk is dropped, not assembled.
    m, p = _chunks(b"y" * 30, 10)[1]
    assert asm.add(m, p, now_ms=2000) is None
    with pytest.raises(CorruptPayload):
        ChunkAssembler(max_total_size=10).add(*_chunks(b"z" * 30, 10)[0], now_ms=0)
