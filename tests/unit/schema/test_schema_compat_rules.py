"""Compatibility rules below the strategies: Avro resolution details, KeyValue, Protobuf,
primitives, and validation of malformed definitions."""

from __future__ import annotations

import base64
import json

import pytest

from magnetar.broker.schema import InvalidSchemaError, SchemaInfo, SchemaType, types
from magnetar.broker.schema.avro_compat import can_read
from magnetar.broker.schema.compatibility import SchemaCompatibilityChecker
from magnetar.broker.schema.definitions import parse_avro, validate
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S

ps = pytest.importorskip("pulsar.schema")


def reads(reader: object, writer: object) -> str | None:
    r = parse_avro(json.dumps(reader).encode())
    w = parse_avro(json.dumps(writer).encode())
    return can_read(r.schema, r.named, w.schema, w.named)


def rec(name: str, *fields: dict, **extra: object) -> dict:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("int", "long"),
        ("int", "double"),
        ("long", "float"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    ],
)
def test_promotions(writer: str, reader: str) -> None:
    assert reads(reader, writer) is None
    if (reader, writer) not in {("string", "bytes"), ("bytes", "string")}:
        assert reads(writer, reader) is not None


def test_unions() -> None:
    assert reads(["null", "string"], "string") is None
    assert reads("string", ["null", "string"]) is not None  # the null branch has no reader
    assert reads(["null", "long"], ["null", "int"]) is None
    reason = reads(["null", "int"], ["null", "string"])
    assert reason is not None and "writer union branch string" in reason


def test_enums() -> None:
    e2 = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    e3 = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    assert reads(e3, e2) is None
    # A writer symbol the reader lacks fails only when such a value is read: Avro's resolving
    # grammar holds no error for it, so Avro (and Pulsar) accept the pair.
    assert reads(e2, e3) is None
    assert reads({**e2, "default": "A"}, e3) is None  # the reader's default absorbs C
    assert "enum name mismatch" in (reads({**e2, "name": "Other"}, e3) or "")


def test_fixed_arrays_maps() -> None:
    f4 = {"type": "fixed", "name": "F", "size": 4}
    assert reads(f4, f4) is None
    assert "size mismatch" in (reads(f4, {**f4, "size": 8}) or "")
    assert reads({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) is None
    assert reads({"type": "array", "items": "int"}, {"type": "array", "items": "long"}) is not None
    assert reads({"type": "map", "values": "double"}, {"type": "map", "values": "float"}) is None
    assert reads({"type": "map", "values": "int"}, {"type": "array", "items": "int"}) is not None


def test_nested_record_reason_has_a_path() -> None:
    inner_w = rec("Address", {"name": "zip", "type": "string"})
    inner_r = rec("Address", {"name": "zip", "type": "string"}, {"name": "city", "type": "string"})
    reason = reads(
        rec("User", {"name": "addr", "type": inner_r}), rec("User", {"name": "addr", "type": inner_w})
    )
    assert reason is not None and "User.addr.city" in reason and "no default" in reason


def test_field_alias_matches_a_renamed_field() -> None:
    writer = rec("R", {"name": "old_name", "type": "int"})
    reader = rec("R", {"name": "new_name", "type": "int", "aliases": ["old_name"]})
    assert reads(reader, writer) is None
    assert reads(rec("R", {"name": "new_name", "type": "int"}), writer) is not None
    assert reads(rec("S", {"name": "old_name", "type": "int"}, aliases=["R"]), writer) is None


def test_recursive_types_terminate() -> None:
    node = rec("Node", {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]})
    node2 = rec(
        "Node",
        {"name": "v", "type": "long"},
        {"name": "next", "type": ["null", "Node"]},
        {"name": "tag", "type": ["null", "string"], "default": None},
    )
    assert reads(node2, node) is None
    assert reads(node, node2) is not None  # long -> int


def test_logical_types_use_the_underlying_type() -> None:
    assert reads({"type": "int", "logicalType": "date"}, "int") is None
    assert (
        reads({"type": "long", "logicalType": "timestamp-millis"}, {"type": "int", "logicalType": "date"})
        is None
    )


@pytest.mark.parametrize(
    "bad",
    [
        b"{not json",
        b'{"type":"record","name":"R","fields":[{"name":"a","type":"strin"}]}',
        b'{"type":"record","name":"R"}',
        b'{"type":"enum","name":"E","symbols":["A","A"]}',
        b'{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
        b"\xff\xfe",
    ],
)
@pytest.mark.parametrize("stype", [SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF])
def test_malformed_struct_definitions(bad: bytes, stype: SchemaType) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid schema definition"):
        validate(SchemaInfo("t", stype, bad))


def test_primitive_definitions() -> None:
    validate(SchemaInfo("STRING", SchemaType.STRING, b"null"))  # what the Python client sends
    validate(SchemaInfo("x", SchemaType.INT64, b""))
    with pytest.raises(InvalidSchemaError, match="length of schema data should be zero, but 3 bytes"):
        validate(SchemaInfo("x", SchemaType.BOOLEAN, b"abc"))
    with pytest.raises(InvalidSchemaError, match="cannot be stored"):
        validate(SchemaInfo("x", SchemaType.AUTO_CONSUME, b""))
    checker = SchemaCompatibilityChecker()
    s = SchemaInfo("STRING", SchemaType.STRING, b"null")
    assert checker.check([s], SchemaInfo("s", SchemaType.STRING, b""), S.FULL) == (True, "")
    ok, reason = checker.check([s], SchemaInfo("i", SchemaType.INT32, b""), S.FULL)
    assert not ok and "exists schema type STRING, new schema type INT32" in reason


def test_client_string_schema_is_valid() -> None:
    si = ps.StringSchema().schema_info()
    validate(SchemaInfo(si.name(), SchemaType[si.schema_type().name], si.schema().encode()))


# ------------------------------------------------------------------ KeyValue


def kv(key: SchemaInfo, value: SchemaInfo) -> SchemaInfo:
    return types.make_key_value_schema_info("kv", key, value)


def avro_rec(**fields: object) -> SchemaInfo:
    si = ps.AvroSchema(type("V", (ps.Record,), dict(fields))).schema_info()
    return SchemaInfo(si.name(), SchemaType.AVRO, si.schema().encode())


STR = SchemaInfo("STRING", SchemaType.STRING, b"")


def test_key_value_checks_both_parts() -> None:
    checker = SchemaCompatibilityChecker()
    v1 = avro_rec(a=ps.String())
    v2_ok = avro_rec(a=ps.String(), b=ps.Integer(required_default=True))
    v2_bad = avro_rec(a=ps.String(), b=ps.Integer())
    old = kv(STR, v1)
    checker.validate(old)
    assert checker.check([old], kv(STR, v2_ok), S.FULL) == (True, "")
    ok, reason = checker.check([old], kv(STR, v2_bad), S.FULL)
    assert not ok and reason.startswith("Incompatible KeyValue value schema") and "'b'" in reason
    ok, reason = checker.check([old], kv(SchemaInfo("i", SchemaType.INT64, b""), v1), S.FULL)
    assert not ok and "KeyValue key schema: exists type STRING, new type INT64" in reason
    # The key is checked with the same rules: an Avro key narrowed int -> long is BACKWARD-only.
    k_int, k_long = avro_rec(n=ps.Integer(required=True)), avro_rec(n=ps.Long(required=True))
    assert checker.check([kv(k_int, v1)], kv(k_long, v1), S.BACKWARD)[0]
    assert not checker.check([kv(k_int, v1)], kv(k_long, v1), S.FORWARD)[0]


def test_key_value_malformed() -> None:
    with pytest.raises(InvalidSchemaError, match="KeyValue"):
        validate(SchemaInfo("kv", SchemaType.KEY_VALUE, b"\x00\x00\x00\x09abc"))
    bad_part = SchemaInfo("v", SchemaType.AVRO, b"{broken")
    with pytest.raises(InvalidSchemaError, match="Invalid schema definition"):
        validate(kv(STR, bad_part))
    nested = kv(STR, STR)
    with pytest.raises(InvalidSchemaError, match="cannot itself be KEY_VALUE"):
        validate(kv(STR, nested))


# ------------------------------------------------------------------ Protobuf


def protobuf_native(message_cls: type) -> SchemaInfo:
    si = ps.ProtobufNativeSchema(message_cls).schema_info()
    return SchemaInfo(si.name(), SchemaType[si.schema_type().name], si.schema().encode())


def test_protobuf_native_root_message_may_not_change() -> None:
    from google.protobuf import duration_pb2, timestamp_pb2  # noqa: PLC0415

    ts, dur = protobuf_native(timestamp_pb2.Timestamp), protobuf_native(duration_pb2.Duration)
    assert ts.type is SchemaType.PROTOBUF_NATIVE
    checker = SchemaCompatibilityChecker()
    checker.validate(ts)
    ok, reason = checker.check([ts], dur, S.FULL)
    assert not ok and "google.protobuf.Timestamp -> google.protobuf.Duration" in reason
    assert checker.check([ts], dur, S.ALWAYS_COMPATIBLE) == (True, "")
    # Same root message, different descriptor bytes (an added file): allowed.
    raw = json.loads(ts.schema_data)
    raw["extra"] = 1
    ts2 = SchemaInfo(ts.name, ts.type, json.dumps(raw).encode())
    assert checker.check([ts], ts2, S.FULL) == (True, "")


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.pop("rootMessageTypeName"), "missing rootMessageTypeName"),
        (lambda d: d.update(fileDescriptorSet="!!!"), "bad fileDescriptorSet"),
        (
            lambda d: d.update(fileDescriptorSet=base64.b64encode(b"\xff\xff").decode()),
            "bad fileDescriptorSet",
        ),
        (lambda d: d.update(rootMessageTypeName="google.protobuf.Nope"), "not found"),
        (lambda d: d.update(rootFileDescriptorName="nope.proto"), "not in the descriptor set"),
    ],
)
def test_protobuf_native_malformed(mutate, match) -> None:  # type: ignore[no-untyped-def]
    from google.protobuf import timestamp_pb2  # noqa: PLC0415

    raw = json.loads(protobuf_native(timestamp_pb2.Timestamp).schema_data)
    mutate(raw)
    with pytest.raises(InvalidSchemaError, match=match):
        validate(SchemaInfo("p", SchemaType.PROTOBUF_NATIVE, json.dumps(raw).encode()))


def test_protobuf_is_always_compatible_except_always_incompatible() -> None:
    checker = SchemaCompatibilityChecker()
    a = SchemaInfo("p", SchemaType.PROTOBUF, json.dumps(rec("M", {"name": "x", "type": "int"})).encode())
    b = SchemaInfo("p", SchemaType.PROTOBUF, json.dumps(rec("M", {"name": "y", "type": "string"})).encode())
    assert checker.check([a], b, S.FULL) == (True, "")
    assert not checker.check([a], b, S.ALWAYS_INCOMPATIBLE)[0]


@pytest.mark.parametrize(
    ("definition", "match"),
    [
        (rec("R", {"name": "a", "type": "int"}, {"name": "a", "type": "string"}), "duplicate field a"),
        (rec("R", {"name": "a", "type": ["null", "string", "string"]}), "duplicate type string in union"),
        (rec("R", {"name": "a", "type": ["null", ["int", "long"]]}), "union may not contain a union"),
        (
            rec(
                "R",
                {
                    "name": "a",
                    "type": {"type": "array", "items": ["int", {"type": "int", "logicalType": "date"}]},
                },
            ),
            "duplicate type int",
        ),
    ],
)
def test_what_avro_refuses_and_fastavro_accepts(definition: dict, match: str) -> None:
    with pytest.raises(InvalidSchemaError, match=match):
        validate(SchemaInfo("t", SchemaType.AVRO, json.dumps(definition).encode()))


def test_union_of_distinct_named_types_is_fine() -> None:
    a = rec("A", {"name": "x", "type": "int"})
    b = rec("B", {"name": "y", "type": "int"})
    validate(
        SchemaInfo(
            "t",
            SchemaType.AVRO,
            json.dumps(rec("R", {"name": "u", "type": ["null", a, b, "A"][:3]})).encode(),
        )
    )
    with pytest.raises(InvalidSchemaError, match="duplicate named type A"):
        validate(
            SchemaInfo(
                "t", SchemaType.AVRO, json.dumps(rec("R", {"name": "u", "type": ["null", a, "A"]})).encode()
            )
        )
