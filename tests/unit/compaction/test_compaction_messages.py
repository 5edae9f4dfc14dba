"""messages.py and framing.py: keys and deletes out of stored bytes, batch rewrite, entry framing."""

from __future__ import annotations

import pytest
from compaction_helpers import CODECS, batch, decode_messages, single

from magnetar.broker.compaction.errors import CompactedLedgerCorrupt
from magnetar.broker.compaction.framing import HEADER_SIZE, decode_compacted_entry, encode_compacted_entry
from magnetar.broker.compaction.messages import BatchMode, KeyedMessage, parse_entry, rewrite_entry
from magnetar.managed_ledger.api import Position
from magnetar.protocol.payload import add_broker_entry_metadata, parse_headers_and_payload


def test_single_message_keys_and_deletes():
    assert parse_entry(single("k", b"v", 1)).messages == [KeyedMessage(-1, "k", False)]
    assert parse_entry(single("k", b"", 2)).messages == [KeyedMessage(-1, "k", True)]
    assert parse_entry(single("k", b"x", 3, null_value=True)).messages == [KeyedMessage(-1, "k", True)]
    assert parse_entry(single(None, b"v", 4)).messages == [KeyedMessage(-1, None, False)]
    # An empty payload compressed is not empty on the wire; uncompressed_size tells.
    assert parse_entry(single("k", b"", 5, codec=CODECS[3])).messages == [KeyedMessage(-1, "k", True)]


def test_garbage_entry_is_keyless_and_marked_corrupt():
    parsed = parse_entry(b"\x0e\x01garbage")
    assert parsed.corrupt and parsed.messages == [KeyedMessage(-1, None, False)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("mode", list(BatchMode))
def test_batch_rewrite_keeps_only_chosen_messages(codec, mode):
    recs = [("a", b"1", False), ("b", b"2", False), ("a", b"3", False), ("c", b"", False), ("b", b"x", True)]
    stored = batch(recs, 10, codec=codec)
    parsed = parse_entry(stored)
    assert [(m.batch_index, m.key, m.is_delete) for m in parsed.messages] == [
        (0, "a", False),
        (1, "b", False),
        (2, "a", False),
        (3, "c", True),
        (4, "b", True),
    ]
    out = rewrite_entry(parsed, lambda i: i in (1, 2), mode)
    assert out is not None and out != stored
    assert decode_messages(out) == [("b", b"2", False), ("a", b"3", False)]
    meta = parse_headers_and_payload(out).metadata
    if mode is BatchMode.MARK_COMPACTED_OUT:
        assert meta.num_messages_in_batch == 5  # batch indexes unchanged
        again = parse_entry(out)
        assert [m.batch_index for m in again.messages] == [1, 2]  # compacted-out ones are gone
    else:
        assert meta.num_messages_in_batch == 2
    assert meta.compression == codec


def test_rewrite_all_kept_is_byte_identical_and_none_kept_is_none():
    stored = batch([("a", b"1", False), ("b", b"2", False)], 1, codec=CODECS[1])
    parsed = parse_entry(stored)
    assert rewrite_entry(parsed, lambda i: True, BatchMode.MARK_COMPACTED_OUT) is stored
    assert rewrite_entry(parsed, lambda i: False, BatchMode.MARK_COMPACTED_OUT) is None
    s = single("k", b"v", 1)
    assert rewrite_entry(parse_entry(s), lambda i: True, BatchMode.DROP) is s


def test_broker_entry_metadata_block_is_kept():
    stored = add_broker_entry_metadata(
        batch([("a", b"1", False), ("b", b"2", False)], 1), broker_timestamp=42, index=7
    )
    out = rewrite_entry(parse_entry(stored), lambda i: i == 1, BatchMode.DROP)
    parsed = parse_headers_and_payload(out)
    assert parsed.checksum_ok
    assert parsed.broker_entry_metadata.broker_timestamp == 42 and parsed.broker_entry_metadata.index == 7


def test_framing_round_trip_and_corruption():
    data = encode_compacted_entry(Position(12, 345), b"stored")
    assert len(data) == HEADER_SIZE + 6
    assert decode_compacted_entry(data) == (Position(12, 345), b"stored")
    with pytest.raises(CompactedLedgerCorrupt):
        decode_compacted_entry(b"\x0e\x01" + data[2:])
    with pytest.raises(CompactedLedgerCorrupt):
        decode_compacted_entry(data[:10])
