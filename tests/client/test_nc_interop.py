"""Interoperability with the official client, both directions, against a real standalone.

Messages produced by one client are consumed by the other unchanged: batched,
compressed, chunked, keyed, with properties, event times and schemas; keys
land on the same partitions; MessageId serialization is byte-identical.
"""

from __future__ import annotations

import asyncio

import pytest
from nc_helpers import create_partitioned

from magnetar.client import AvroSchema, JsonSchema, StringSchema

pulsar = pytest.importorskip("pulsar")
from pulsar import schema as pschema  # noqa: E402

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def official(standalone):
    c = pulsar.Client(
        standalone.broker_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )
    yield c
    c.close()


CASES = [
    pytest.param({"batching_enabled": True}, id="batched"),
    pytest.param({"batching_enabled": False}, id="unbatched"),
    pytest.param({"batching_enabled": True, "compression_type": "LZ4"}, id="lz4"),
    pytest.param({"batching_enabled": True, "compression_type": "ZLib"}, id="zlib"),
    pytest.param({"batching_enabled": False, "compression_type": "ZSTD"}, id="zstd"),
    pytest.param({"batching_enabled": True, "compression_type": "SNAPPY"}, id="snappy"),
]


def _official_kwargs(kw: dict) -> dict:
    out = dict(kw)
    if "compression_type" in out:
        out["compression_type"] = getattr(pulsar.CompressionType, out["compression_type"])
    return out


def _expected(i: int) -> tuple[bytes, dict, str, int]:
    return (
        f"body-{i}-".encode() * 30,
        {"i": str(i), "kind": "interop"},
        f"key-{i % 4}",
        1_700_000_000_000 + i,
    )


@pytest.mark.parametrize("kw", CASES)
async def test_official_to_native(official, client, topic, kw):
    consumer = await client.subscribe(topic, "native", initial_position="earliest")
    producer = official.create_producer(topic, batching_max_publish_delay_ms=5, **_official_kwargs(kw))
    ids = []
    for i in range(20):
        data, props, key, et = _expected(i)
        producer.send_async(data, lambda r, mid: ids.append(mid), properties=props, partition_key=key,
                            event_timestamp=et)  # fmt: skip
    producer.flush()
    producer.close()
    for i in range(20):
        msg = await consumer.receive(5000)
        data, props, key, et = _expected(i)
        assert (msg.data(), msg.properties(), msg.partition_key(), msg.event_timestamp()) == (
            data,
            props,
            key,
            et,
        )
        assert msg.message_id().serialize() == ids[i].serialize()
        await consumer.acknowledge(msg)


@pytest.mark.parametrize("kw", CASES)
async def test_native_to_official(official, client, topic, kw):
    consumer = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    producer = await client.create_producer(topic, batching_max_publish_delay_ms=5, **kw)
    futs = []
    for i in range(20):
        data, props, key, et = _expected(i)
        futs.append(await producer.send_async(data, properties=props, partition_key=key, event_timestamp=et))
    ids = await asyncio.gather(*futs)
    for i in range(20):
        msg = consumer.receive(5000)
        data, props, key, et = _expected(i)
        assert (msg.data(), msg.properties(), msg.partition_key(), msg.event_timestamp()) == (
            data,
            props,
            key,
            et,
        )
        assert msg.message_id().serialize() == ids[i].serialize()
        consumer.acknowledge(msg)
    consumer.close()


async def test_chunked_both_directions(official, client, topic):
    big = bytes(range(256)) * (6 * 1024 * 1024 // 256)
    native_consumer = await client.subscribe(topic, "n", initial_position="earliest")
    off_consumer = official.subscribe(topic, "o", initial_position=pulsar.InitialPosition.Earliest)
    off_producer = official.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    off_producer.send(big, properties={"from": "official"})
    native_producer = await client.create_producer(topic, chunking_enabled=True)
    await native_producer.send(big[::-1], properties={"from": "native"})
    a = await native_consumer.receive(10_000)
    b = await native_consumer.receive(10_000)
    assert (a.data(), a.properties()) == (big, {"from": "official"})
    assert (b.data(), b.properties()) == (big[::-1], {"from": "native"})
    x, y = off_consumer.receive(10_000), off_consumer.receive(10_000)
    assert (x.data(), y.data()) == (big, big[::-1])
    off_consumer.close()
    off_producer.close()


class Person(pschema.Record):
    name = pschema.String()
    age = pschema.Integer()


@pytest.mark.parametrize("kind", ["avro", "json", "string"])
async def test_schemas_both_directions(official, client, topic, kind):
    if kind == "avro":
        off_schema, nat_schema = pschema.AvroSchema(Person), AvroSchema(Person.schema())
    elif kind == "json":
        off_schema, nat_schema = pschema.JsonSchema(Person), JsonSchema(Person.schema())
    else:
        off_schema, nat_schema = pschema.StringSchema(), StringSchema()

    def value(i):
        return f"v{i}" if kind == "string" else Person(name=f"n{i}", age=i)

    def plain(v):
        return v if isinstance(v, str) else {"name": v.name, "age": v.age}

    off_consumer = official.subscribe(
        topic, "o", schema=off_schema, initial_position=pulsar.InitialPosition.Earliest
    )
    nat_consumer = await client.subscribe(topic, "n", schema=nat_schema, initial_position="earliest")
    off_producer = official.create_producer(topic, schema=off_schema)
    off_producer.send(value(1))
    nat_producer = await client.create_producer(topic, schema=nat_schema)
    await nat_producer.send(plain(value(2)))
    got = [(await nat_consumer.receive(5000)).value() for _ in range(2)]
    assert got == [plain(value(1)), plain(value(2))]
    off_got = [plain(off_consumer.receive(5000).value()) for _ in range(2)]
    assert off_got == [plain(value(1)), plain(value(2))]
    info = await client.get_schema_info(topic)
    assert info is not None and info[0].type.name == kind.upper()
    off_consumer.close()
    off_producer.close()


async def test_key_hash_routing_matches_official(standalone, official, client, topic):
    create_partitioned(standalone, topic, 5)
    off = official.create_producer(topic, batching_enabled=False)
    nat = await client.create_producer(topic, batching_enabled=False)
    keys = [f"user-{i}" for i in range(40)] + ["ключ", "a" * 100, "12345678", "1234567"]
    off_parts, nat_parts = [], []
    for key in keys:
        off_parts.append(off.send(b"o", partition_key=key).partition())
        nat_parts.append((await nat.send(b"n", partition_key=key)).partition)
    assert off_parts == nat_parts
    assert len(set(nat_parts)) == 5
    off.close()


def test_schema_definitions_are_byte_identical_to_the_official_client():
    from google.protobuf import timestamp_pb2

    from magnetar.client import ProtobufNativeSchema

    pairs = [
        (pschema.AvroSchema(Person), AvroSchema(Person.schema())),
        (pschema.JsonSchema(Person), JsonSchema(Person.schema())),
        (pschema.StringSchema(), StringSchema()),
        (
            pschema.ProtobufNativeSchema(timestamp_pb2.Timestamp),
            ProtobufNativeSchema(timestamp_pb2.Timestamp),
        ),
    ]
    for off, nat in pairs:
        wire = nat.wire_schema()
        info = off.schema_info()
        assert (wire.schema_data.decode(), wire.name) == (info.schema(), info.name())


async def test_protobuf_native_both_directions(official, client, topic):
    from google.protobuf import timestamp_pb2

    from magnetar.client import ProtobufNativeSchema

    off_schema = pschema.ProtobufNativeSchema(timestamp_pb2.Timestamp)
    nat_schema = ProtobufNativeSchema(timestamp_pb2.Timestamp)
    off_consumer = official.subscribe(
        topic, "o", schema=off_schema, initial_position=pulsar.InitialPosition.Earliest
    )
    nat_consumer = await client.subscribe(topic, "n", schema=nat_schema, initial_position="earliest")
    official.create_producer(topic, schema=off_schema).send(timestamp_pb2.Timestamp(seconds=1, nanos=2))
    await (await client.create_producer(topic, schema=nat_schema)).send(timestamp_pb2.Timestamp(seconds=3))
    got = [(await nat_consumer.receive(5000)).value() for _ in range(2)]
    assert [(t.seconds, t.nanos) for t in got] == [(1, 2), (3, 0)]
    off_got = [off_consumer.receive(5000).value() for _ in range(2)]
    assert [(t.seconds, t.nanos) for t in off_got] == [(1, 2), (3, 0)]
    off_consumer.close()


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_key_value_separated_both_directions(official, client, topic, batching):
    """KeyValue SEPARATED: the key is the message key (base64, flagged), the payload the value alone.

    The official Python client has no KeyValue schema, so it meets this one on the wire: it reads
    the base64 key and the value bytes, and a key it sends (plain text) is decoded as UTF-8.
    """
    import base64
    import json

    from magnetar.client import Int32Schema, KeyValueSchema

    kv = KeyValueSchema(Int32Schema(), JsonSchema({"type": "record", "name": "V", "fields": []}), "SEPARATED")
    off_consumer = official.subscribe(topic, "o", initial_position=pulsar.InitialPosition.Earliest)
    producer = await client.create_producer(topic, schema=kv, batching_enabled=batching)
    values = [(-1, {"a": 1}), (2**31 - 1, {"b": 2}), (None, {"c": 3})]
    await asyncio.gather(*[await producer.send_async(v) for v in values])
    for key, value in values:
        msg = off_consumer.receive(5000)
        assert json.loads(msg.data()) == value
        if key is None:
            assert msg.partition_key() == ""
        else:
            assert base64.b64decode(msg.partition_key()) == key.to_bytes(4, "big", signed=True)
    info = await client.get_schema_info(topic)
    assert info[0].properties["kv.encoding.type"] == "SEPARATED"

    text_kv = KeyValueSchema(
        StringSchema(), JsonSchema({"type": "record", "name": "V", "fields": []}), "SEPARATED"
    )
    t2 = topic + "-text"
    nat_consumer = await client.subscribe(t2, "n", schema=text_kv, initial_position="earliest")
    await (await client.create_producer(t2, schema=text_kv)).send(("mine", {"x": 0}))
    off_producer = official.create_producer(t2, batching_enabled=batching)
    off_producer.send(json.dumps({"y": 1}).encode(), partition_key="theirs")
    off_producer.flush()
    got = [(await nat_consumer.receive(5000)).value() for _ in range(2)]
    assert got == [("mine", {"x": 0}), ("theirs", {"y": 1})]
    off_consumer.close()
    off_producer.close()
