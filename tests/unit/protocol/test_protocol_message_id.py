"""MessageId: byte-identical to the official client's serialize(), ordering, constants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol.errors import RemoteProtocolError
from magnetar.protocol.message_id import EARLIEST, INT64_MAX, LATEST, MessageId, to_signed64, to_unsigned64

pulsar = pytest.importorskip("pulsar")


def test_observed_bytes():
    # pulsar-protocol.md section 9, observed with pulsar-client 3.13.0.
    assert MessageId(7, 0).serialize().hex() == "08071000"
    assert MessageId(7, 1, batch_index=0, batch_size=3).serialize().hex() == "0807100120003003"
    assert EARLIEST.serialize().hex() == "08" + "ff" * 9 + "01" + "10" + "ff" * 9 + "01"
    assert LATEST.serialize().hex() == "08ffffffffffffffff7f10ffffffffffffffff7f"


def test_constants_match_official_client():
    assert EARLIEST.serialize() == pulsar.MessageId.earliest.serialize()
    assert LATEST.serialize() == pulsar.MessageId.latest.serialize()
    assert EARLIEST == MessageId(-1, -1) and LATEST == MessageId(INT64_MAX, INT64_MAX)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(-1, 2**40),
    st.integers(-1, 2**40),
    st.integers(-1, 1000),
    st.integers(-1, 1000),
)
def test_serialize_matches_official_client(ledger, entry, partition, batch_index):
    official = pulsar.MessageId(partition, ledger, entry, batch_index)
    ours = MessageId(ledger, entry, partition, batch_index)
    assert ours.serialize() == official.serialize()
    back = pulsar.MessageId.deserialize(ours.serialize())
    assert (back.ledger_id(), back.entry_id(), back.partition(), back.batch_index()) == (
        ledger,
        entry,
        partition,
        batch_index,
    )
    assert MessageId.deserialize(official.serialize()) == ours


def test_batch_and_chunk_ids_round_trip():
    mid = MessageId(9, 4, 2, 1, 5, ack_set=(30,))
    assert MessageId.deserialize(mid.serialize()) == MessageId(9, 4, 2, 1, 5)  # ack_set never serialized
    chunked = MessageId(7, 3, first_chunk=MessageId(7, 2))
    assert MessageId.deserialize(chunked.serialize()) == chunked
    assert str(chunked) == "(7,2,-1,-1);(7,3,-1,-1)"
    assert str(MessageId(7, 1, -1, 0)) == "(7,1,-1,0)"
    assert MessageId.from_pb(mid.to_pb()) == mid


def test_ordering():
    assert MessageId(1, 5) < MessageId(2, 0)
    assert MessageId(1, 5) < MessageId(1, 6)
    assert MessageId(1, 5, batch_index=3) < MessageId(1, 5)  # inside the batch < whole entry
    assert MessageId(1, 5, batch_index=1) < MessageId(1, 5, batch_index=2)
    assert EARLIEST < MessageId(0, 0) < LATEST
    assert sorted([MessageId(2, 0), MessageId(1, 1, batch_index=0), MessageId(1, 1)]) == [
        MessageId(1, 1, batch_index=0),
        MessageId(1, 1),
        MessageId(2, 0),
    ]


def test_signed_unsigned_helpers_and_bad_bytes():
    assert to_unsigned64(-1) == 2**64 - 1 and to_signed64(2**64 - 1) == -1
    assert to_signed64(5) == 5
    with pytest.raises(RemoteProtocolError):
        MessageId.deserialize(b"\x08\x01")  # no entryId
    with pytest.raises(RemoteProtocolError):
        MessageId.deserialize(b"\xff\xff")
