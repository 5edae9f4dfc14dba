"""magnetar.client pieces without a broker: hashes, ack sets, error mapping, enum names, schemas."""

from __future__ import annotations

import pytest

from magnetar.client import errors
from magnetar.client.acks import AckGrouper, RedeliveryTracker, ack_set_words
from magnetar.client.hashing import boost_hash, java_string_hash, murmur3_hash
from magnetar.client.schema import AvroSchema, JsonSchema, StringSchema
from magnetar.client.types import ConsumerType, coerce
from magnetar.protocol.message_id import MessageId


def test_hashes_match_known_values():
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("") == 0
    assert murmur3_hash("hello") == 613153351  # Murmur3_32 of "hello", seed 0, masked
    # pinned from pulsar-client 3.x routing on a 5-partition topic (see test_nc_interop)
    assert [boost_hash(f"user-{i}") % 5 for i in range(6)] == [3, 4, 1, 3, 1, 0]


def test_ack_set_words_are_java_bitset_longs():
    assert ack_set_words({1, 2, 3, 4}, 5) == (30,)  # observed: acking index 0 of 5
    assert ack_set_words(set(), 5) == ()
    assert ack_set_words({63}, 64) == (-(1 << 63),)


def test_batch_acks_wait_for_the_whole_batch_unless_index_acks():
    g = AckGrouper(batch_index_ack=False)
    for i in range(2):
        g.add_individual(MessageId(1, 2, -1, i, 3))
    assert len(g) == 0  # nothing to send while index 2 is un-acked
    g.add_individual(MessageId(1, 2, -1, 2, 3))
    assert g.take()[0] == [MessageId(1, 2)]
    g = AckGrouper(batch_index_ack=True)
    g.add_individual(MessageId(1, 2, -1, 0, 5))
    ind, _ = g.take()
    assert ind == [MessageId(1, 2, ack_set=(30,))]
    g.add_cumulative(MessageId(1, 7, -1, 1, 4))
    assert g.take()[1] == MessageId(1, 7, ack_set=(12,))
    g = AckGrouper(batch_index_ack=False)
    g.add_cumulative(MessageId(1, 7, -1, 1, 4))
    assert g.take()[1] == MessageId(1, 6)  # mid-batch: the previous entry, as Java does


def test_redelivery_tracker_orders_by_deadline():
    t = RedeliveryTracker()
    t.schedule(MessageId(1, 1), 5.0, "a")
    t.schedule(MessageId(1, 2), 1.0, "b")
    assert t.due(2.0) == ["b"] and len(t) == 1
    t.cancel(MessageId(1, 1))
    assert t.due(10.0) == []


def test_server_errors_are_typed():
    e = errors.error_from_code(16, "busy")
    assert isinstance(e, errors.ProducerBusy) and "ProducerBusy" in str(e)
    assert isinstance(errors.error_from_code(18), errors.IncompatibleSchema)
    assert isinstance(errors.error_from_code(999), errors.UnknownError)
    assert errors.ServiceNotReady.retriable and not errors.TopicNotFound.retriable


def test_enum_coercion_and_schema_codecs():
    assert coerce(ConsumerType, 3) is ConsumerType.KeyShared
    with pytest.raises(errors.InvalidConfiguration):
        coerce(ConsumerType, 9)
    assert StringSchema().wire_schema().schema_data == b"null"
    definition = {"type": "record", "name": "P", "fields": [{"name": "a", "type": "int"}]}
    avro = AvroSchema(definition)
    assert avro.decode(avro.encode({"a": 5})) == {"a": 5} and avro.encode({"a": 5}) == b"\x0a"
    assert JsonSchema(definition).decode(b'{"a": 1}') == {"a": 1}
    with pytest.raises(errors.InvalidConfiguration):
        StringSchema().encode(b"bytes")


def test_hand_encoded_batch_records_equal_protobuf():
    import asyncio

    from magnetar.client.batching import OutgoingMessage, encode_records
    from magnetar.protocol.batch import SingleMessage, encode_batch

    loop = asyncio.new_event_loop()
    fut = loop.create_future()
    cases = [(b"abc", 0), (b"x" * 200, 1), (b"", 300), (b"y", 2**40)]
    msgs = [OutgoingMessage(p, fut, seq) for p, seq in cases]
    msgs.append(OutgoingMessage(b"k", fut, 7, {"a": "b"}, "key", b"ok", 5))
    expected = encode_batch(
        [SingleMessage(payload=p, sequence_id=seq) for p, seq in cases]
        + [SingleMessage(b"k", {"a": "b"}, "key", ordering_key=b"ok", event_time=5, sequence_id=7)]
    )
    assert encode_records(msgs) == expected
    loop.close()
