"""Every schema type the official Python client has, through a real standalone.

Each test produces with a schema, consumes with the same (or AUTO_CONSUME)
schema, and checks what the registry stored through the REST API.
"""

from __future__ import annotations

import json

import _pulsar
import httpx
import pytest
from schema_helpers import AutoConsumeSchema, KeyValueBytesSchema, PrimitiveSchema, rest_path

pulsar = pytest.importorskip("pulsar")
from pulsar.schema import (  # noqa: E402
    AvroSchema,
    BytesSchema,
    Double,
    Integer,
    JsonSchema,
    Record,
    Schema,
    String,
    StringSchema,
)

pytestmark = pytest.mark.compat
RECEIVE_TIMEOUT_MS = 10_000


class User(Record):
    name = String()
    age = Integer()


class Measurement(Record):
    sensor = String()
    value = Double()


@pytest.fixture
def http(standalone):
    with httpx.Client(base_url=standalone.web_url, timeout=10) as c:
        yield c


def roundtrip(client, topic: str, schema, values, consumer_schema=None) -> list:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(
        topic, "sub", schema=consumer_schema or schema, initial_position=pulsar.InitialPosition.Earliest
    )
    producer = client.create_producer(topic, schema=schema)
    for v in values:
        producer.send(v)
    out = []
    for _ in values:
        msg = consumer.receive(RECEIVE_TIMEOUT_MS)
        out.append(msg)
        consumer.acknowledge(msg)
    producer.close()
    consumer.close()
    return out


def test_string_schema(client, http, topic) -> None:
    msgs = roundtrip(client, topic, StringSchema(), ["a", "ünïcode", ""])
    assert [m.value() for m in msgs] == ["a", "ünïcode", ""]
    r = http.get(rest_path(topic) + "/schema")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (
        body["type"] == "STRING" and body["version"] == 0 and body["data"] in ("", "null")
    )  # the Python client sends json.dumps(None)


def test_bytes_schema_is_schemaless(client, http, topic) -> None:
    msgs = roundtrip(client, topic, BytesSchema(), [b"\x00\x01", b"x"])
    assert [m.value() for m in msgs] == [b"\x00\x01", b"x"]
    # BYTES is the "no schema" of Pulsar: nothing is registered.
    r = http.get(rest_path(topic) + "/schema")
    assert r.status_code == 404 and "reason" in r.json()


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_record_schema(client, http, topic, kind) -> None:
    schema = AvroSchema(User) if kind == "avro" else JsonSchema(User)
    msgs = roundtrip(client, topic, schema, [User(name="ann", age=3), User(name="bo", age=40)])
    assert [(m.value().name, m.value().age) for m in msgs] == [("ann", 3), ("bo", 40)]
    assert all(m.int_schema_version() == 0 for m in (x._message for x in msgs))
    body = http.get(rest_path(topic) + "/schema").json()
    assert body["type"] == kind.upper() and body["version"] == 0
    definition = json.loads(body["data"])
    assert definition["name"] == "User" and {f["name"] for f in definition["fields"]} == {"name", "age"}


@pytest.mark.parametrize(
    ("stype", "values"),
    [
        (_pulsar.SchemaType.INT8, [-128, 0, 127]),
        (_pulsar.SchemaType.INT16, [-30000, 12]),
        (_pulsar.SchemaType.INT32, [-(2**31), 2**31 - 1]),
        (_pulsar.SchemaType.INT64, [-(2**63), 2**63 - 1]),
        (_pulsar.SchemaType.FLOAT, [1.5, -2.25]),
        (_pulsar.SchemaType.DOUBLE, [3.141592653589793]),
    ],
)
def test_primitive_schema(client, http, topic, stype, values) -> None:
    """The C++ client sends no schema for primitive types (it treats them as schemaless on the
    wire), so the topic's primitive schema is registered through REST, as an operator would."""
    r = http.post(rest_path(topic) + "/schema", json={"type": stype.name, "schema": "", "properties": {}})
    assert r.status_code == 200 and r.json() == {"version": {"version": 0}}, r.text
    msgs = roundtrip(client, topic, PrimitiveSchema(stype), values)
    assert [m.value() for m in msgs] == values
    r = http.get(rest_path(topic) + "/schema")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["type"] == stype.name and body["version"] == 0


def test_primitive_type_change_rejected(client, http, topic) -> None:
    r = http.post(rest_path(topic) + "/schema", json={"type": "INT32", "schema": ""})
    assert r.status_code == 200, r.text
    r = http.post(rest_path(topic) + "/schema", json={"type": "INT64", "schema": ""})
    assert r.status_code == 409 and "reason" in r.json()
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())
    assert [v["type"] for v in http.get(rest_path(topic) + "/schemas").json()["getSchemaResponses"]] == [
        "INT32"
    ]


def test_key_value_schema(client, http, topic) -> None:
    """KEY_VALUE over the wire: the producer's and consumer's KeyValue schema is registered and
    checked.  (pulsar-client 3.13's Python binding cannot *send* KeyValue messages: its
    SchemaInfo has no properties, and the C++ core refuses to encode without
    ``kv.encoding.type`` -- "Not found kv.encoding.type by properties".)"""
    producer = client.create_producer(topic, schema=KeyValueBytesSchema())
    consumer = client.subscribe(topic, "sub", schema=KeyValueBytesSchema())
    body = http.get(rest_path(topic) + "/schema").json()
    assert body["type"] == "KEY_VALUE" and body["version"] == 0
    assert json.loads(body["data"]) == {"key": "", "value": ""}
    # Another type is a different schema: refused under FULL while the KeyValue one is live.
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())
    # The same KeyValue schema again reuses version 0.
    client.create_producer(topic, schema=KeyValueBytesSchema()).close()
    assert len(http.get(rest_path(topic) + "/schemas").json()["getSchemaResponses"]) == 1
    producer.close()
    consumer.close()


def test_key_value_parts_checked_via_rest(http, topic) -> None:
    """KeyValue compatibility checks both parts (the REST form carries the part types)."""
    key = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "int"}]}
    v1 = {"type": "record", "name": "V", "fields": [{"name": "a", "type": "string"}]}
    v2 = {
        "type": "record",
        "name": "V",
        "fields": [{"name": "a", "type": "string"}, {"name": "b", "type": "int", "default": 0}],
    }
    bad = {"type": "record", "name": "V", "fields": [{"name": "a", "type": "int"}]}
    props = {"key.schema.type": "AVRO", "value.schema.type": "AVRO", "kv.encoding.type": "INLINE"}

    def post(value):  # type: ignore[no-untyped-def]
        payload = {
            "type": "KEY_VALUE",
            "schema": json.dumps({"key": key, "value": value}),
            "properties": props,
        }
        return http.post(rest_path(topic) + "/schema", json=payload)

    assert post(v1).json() == {"version": {"version": 0}}
    assert post(v2).json() == {"version": {"version": 1}}
    r = post(bad)
    assert r.status_code == 409, r.text
    assert len(http.get(rest_path(topic) + "/schemas").json()["getSchemaResponses"]) == 2


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_auto_consume(client, http, topic, kind) -> None:
    """An AUTO_CONSUME consumer reads a typed topic; the schema version on each message leads
    (through GET_SCHEMA-equivalent REST) to the writer schema that decodes it."""
    schema = AvroSchema(Measurement) if kind == "avro" else JsonSchema(Measurement)
    values = [Measurement(sensor="s1", value=1.5), Measurement(sensor="s2", value=-3.0)]
    msgs = roundtrip(client, topic, schema, values, consumer_schema=AutoConsumeSchema())
    raws = [m.value() for m in msgs]
    versions = {m._message.int_schema_version() for m in msgs}
    assert versions == {0}
    body = http.get(rest_path(topic) + "/schema/0").json()
    assert body["type"] == kind.upper()
    decoded = [schema.decode(raw) for raw in raws]
    assert [(d.sensor, d.value) for d in decoded] == [("s1", 1.5), ("s2", -3.0)]


def test_auto_consume_on_schemaless_topic(client, topic) -> None:
    msgs = roundtrip(client, topic, BytesSchema(), [b"raw"], consumer_schema=AutoConsumeSchema())
    assert [m.value() for m in msgs] == [b"raw"]


def test_protobuf_native_schema(client, http, topic) -> None:
    from google.protobuf import timestamp_pb2  # noqa: PLC0415
    from pulsar.schema import ProtobufNativeSchema  # noqa: PLC0415

    schema = ProtobufNativeSchema(timestamp_pb2.Timestamp)
    msgs = roundtrip(client, topic, schema, [timestamp_pb2.Timestamp(seconds=5, nanos=7)])
    assert (msgs[0].value().seconds, msgs[0].value().nanos) == (5, 7)
    body = http.get(rest_path(topic) + "/schema").json()
    assert body["type"] == "PROTOBUF_NATIVE" and body["version"] == 0
    assert json.loads(body["data"])["rootMessageTypeName"] == "google.protobuf.Timestamp"


class AutoPublishSchema(Schema):
    """AUTO_PUBLISH (Java's AUTO_PRODUCE_BYTES): send bytes already encoded in the topic's schema."""

    def __init__(self) -> None:
        self._record_cls = bytes
        self._schema_info = _pulsar.SchemaInfo(_pulsar.SchemaType.AUTO_PUBLISH, "AUTO_PUBLISH", "")

    def encode(self, obj):  # type: ignore[no-untyped-def]
        return obj

    def decode(self, data):  # type: ignore[no-untyped-def]
        return data


def test_auto_publish_bytes_into_avro_topic(client, http, topic) -> None:
    typed = AvroSchema(Measurement)
    consumer = client.subscribe(topic, "sub", schema=typed)
    producer = client.create_producer(topic, schema=AutoPublishSchema())
    producer.send(typed.encode(Measurement(sensor="auto", value=2.5)))
    msg = consumer.receive(RECEIVE_TIMEOUT_MS)
    assert (msg.value().sensor, msg.value().value) == ("auto", 2.5)
    assert [v["version"] for v in http.get(rest_path(topic) + "/schemas").json()["getSchemaResponses"]] == [0]
    producer.close()
    consumer.close()
