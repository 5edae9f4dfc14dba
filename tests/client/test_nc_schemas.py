"""magnetar.client schemas: primitives, KeyValue, AUTO_CONSUME, AUTO_PRODUCE, Avro evolution, mismatch."""

from __future__ import annotations

import httpx
import pytest

from magnetar.client import (
    AutoConsumeSchema,
    AutoProduceBytesSchema,
    AvroSchema,
    DoubleSchema,
    IncompatibleSchema,
    Int32Schema,
    Int64Schema,
    InvalidConfiguration,
    JsonSchema,
    KeyValueSchema,
    StringSchema,
)

V1 = {"type": "record", "name": "M", "fields": [{"name": "sensor", "type": "string"}]}
V2 = {
    "type": "record",
    "name": "M",
    "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double", "default": 0.0}],
}


async def _roundtrip(client, topic, schema, values, consumer_schema=None):
    consumer = await client.subscribe(
        topic, "s", schema=consumer_schema or schema, initial_position="earliest"
    )
    producer = await client.create_producer(topic, schema=schema)
    for v in values:
        await producer.send(v)
    out = [await consumer.receive(5000) for _ in values]
    await producer.close()
    await consumer.close()
    return out


@pytest.mark.parametrize(
    ("schema", "values"),
    [(Int32Schema(), [-(2**31), 7]), (Int64Schema(), [2**63 - 1]), (DoubleSchema(), [3.25])],
    ids=["int32", "int64", "double"],
)
async def test_primitive_schemas(client, topic, schema, values):
    msgs = await _roundtrip(client, topic, schema, values)
    assert [m.value() for m in msgs] == values


async def test_key_value_inline(standalone, client, topic):
    kv = KeyValueSchema(StringSchema(), JsonSchema(V1))
    msgs = await _roundtrip(client, topic, kv, [("k1", {"sensor": "a"}), ("k2", {"sensor": "b"})])
    assert [m.value() for m in msgs] == [("k1", {"sensor": "a"}), ("k2", {"sensor": "b"})]
    async with httpx.AsyncClient(base_url=standalone.web_url) as http:
        body = (await http.get("/admin/v2/schemas/" + topic.split("://")[1] + "/schema")).json()
    assert body["type"] == "KEY_VALUE"


async def test_auto_consume_and_schema_mismatch(client, topic):
    msgs = await _roundtrip(
        client, topic, AvroSchema(V1), [{"sensor": "x"}], consumer_schema=AutoConsumeSchema()
    )
    assert msgs[0].value() == {"sensor": "x"}
    with pytest.raises(IncompatibleSchema):
        await client.create_producer(topic, schema=StringSchema())


async def test_auto_consume_on_schemaless_topic(client, topic):
    consumer = await client.subscribe(topic, "s", schema=AutoConsumeSchema(), initial_position="earliest")
    producer = await client.create_producer(topic)
    await producer.send(b"raw")
    assert (await consumer.receive(5000)).value() == b"raw"


async def test_avro_messages_of_an_older_version_decode_into_the_new_shape(client, topic):
    old = await client.create_producer(topic, schema=AvroSchema(V1))
    await old.send({"sensor": "old"})
    consumer = await client.subscribe(topic, "s", schema=AvroSchema(V2), initial_position="earliest")
    new = await client.create_producer(topic, schema=AvroSchema(V2))
    await new.send({"sensor": "new", "value": 1.5})
    got = [(await consumer.receive(5000)).value() for _ in range(2)]
    assert got == [{"sensor": "old", "value": 0.0}, {"sensor": "new", "value": 1.5}]


async def test_auto_produce_checks_bytes_against_the_topic_schema(client, topic):
    typed = AvroSchema(V1)
    consumer = await client.subscribe(topic, "s", schema=typed)
    producer = await client.create_producer(topic, schema=AutoProduceBytesSchema())
    await producer.send(typed.encode({"sensor": "auto"}))
    assert (await consumer.receive(5000)).value() == {"sensor": "auto"}
    with pytest.raises(InvalidConfiguration):
        await producer.send(b"\xff\xff\xff not avro")
