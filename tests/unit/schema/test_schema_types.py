"""Schema types, version bytes, KeyValue encoding and the admin REST shapes."""

from __future__ import annotations

import json
import struct

import pytest

from magnetar.broker import errors as broker_errors
from magnetar.broker.schema import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSchemaVersionError,
    SchemaInfo,
    SchemaNotFoundError,
    SchemaRecord,
    SchemaType,
    SchemaVersion,
    types,
)

_pulsar = pytest.importorskip("_pulsar")


def test_schema_type_values_match_the_official_client() -> None:
    for name, member in _pulsar.SchemaType.__members__.items():
        assert SchemaType[name].value == int(member), name


def test_schema_type_proto_numbers() -> None:
    assert SchemaType.from_proto(4) is SchemaType.AVRO
    assert SchemaType.from_proto(5) is SchemaType.BOOLEAN
    assert SchemaType.from_proto(15) is SchemaType.KEY_VALUE
    assert SchemaType.from_proto(20) is SchemaType.PROTOBUF_NATIVE
    assert SchemaType.from_proto(21) is SchemaType.AUTO_CONSUME
    with pytest.raises(InvalidSchemaError, match="Unknown schema type 22"):
        SchemaType.from_proto(22)
    assert SchemaType.JSON.to_proto() == 2
    with pytest.raises(InvalidSchemaError):
        SchemaType.BYTES.to_proto()


def test_schema_type_names() -> None:
    assert SchemaType.from_name("key_value") is SchemaType.KEY_VALUE
    assert SchemaType.from_name("BOOL") is SchemaType.BOOLEAN
    assert SchemaType.from_name("LOCAL_DATE_TIME").value == 19
    with pytest.raises(InvalidSchemaError, match="Unknown schema type 'XML'"):
        SchemaType.from_name("XML")


@pytest.mark.parametrize("n", [0, 1, 255, 256, 2**32, 2**63 - 1])
def test_version_bytes_are_8_byte_big_endian(n: int) -> None:
    b = SchemaVersion(n).to_bytes()
    assert len(b) == 8 and b == struct.pack(">q", n) and b == n.to_bytes(8, "big")
    assert SchemaVersion.from_bytes(b) == SchemaVersion(n)


def test_version_bytes_edge_cases() -> None:
    assert SchemaVersion(1).to_bytes() == b"\x00\x00\x00\x00\x00\x00\x00\x01"
    assert SchemaVersion.from_bytes(b"") is None  # "no schema"
    assert SchemaVersion.from_bytes(None) is None
    assert SchemaVersion.from_bytes(struct.pack(">q", -1)) is None  # latest
    with pytest.raises(InvalidSchemaVersionError, match="expected 8 bytes"):
        SchemaVersion.from_bytes(b"\x01\x02")
    with pytest.raises(InvalidSchemaVersionError):
        SchemaVersion.from_bytes(struct.pack(">q", -5))
    with pytest.raises(InvalidSchemaVersionError):
        SchemaVersion(-1)


def test_key_value_data_layout() -> None:
    data = types.encode_key_value_data(b"KEY", b"VALUE!")
    assert data == b"\x00\x00\x00\x03KEY\x00\x00\x00\x06VALUE!"
    assert types.decode_key_value_data(data) == (b"KEY", b"VALUE!")
    absent = types.encode_key_value_data(None, b"v")
    assert absent[:4] == b"\xff\xff\xff\xff"
    assert types.decode_key_value_data(absent) == (b"", b"v")


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x00\x00",
        b"\x00\x00\x00\x05ab",
        b"\x00\x00\x00\x00\x00\x00\x00\x00X",
        b"\xff\xff\xff\xfe" + b"\x00" * 4,
    ],
)
def test_key_value_data_malformed(bad: bytes) -> None:
    with pytest.raises(InvalidSchemaError, match="KeyValue"):
        types.decode_key_value_data(bad)


def test_key_value_parts_round_trip() -> None:
    key = SchemaInfo("k", SchemaType.STRING, b"", {})
    value = SchemaInfo("v", SchemaType.AVRO, b'{"type":"record","name":"V","fields":[]}', {"a": "1"})
    kv = types.make_key_value_schema_info("kv", key, value, "SEPARATED")
    assert kv.properties["key.schema.type"] == "STRING"
    assert kv.properties["value.schema.type"] == "AVRO"
    assert kv.properties["kv.encoding.type"] == "SEPARATED"
    k2, v2 = types.key_value_parts(kv)
    assert (k2.type, k2.schema_data, k2.name) == (SchemaType.STRING, b"", "k")
    assert (v2.type, v2.schema_data, dict(v2.properties)) == (SchemaType.AVRO, value.schema_data, {"a": "1"})


def test_post_payload_and_get_response() -> None:
    definition = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    info = types.schema_info_from_post_payload(
        {"type": "AVRO", "schema": definition, "properties": {"p": "q"}}, name="t"
    )
    assert info == SchemaInfo("t", SchemaType.AVRO, definition.encode(), {"p": "q"})
    rec = SchemaRecord(3, info, 1234)
    assert types.get_schema_response(rec) == {
        "version": 3,
        "type": "AVRO",
        "timestamp": 1234,
        "data": definition,
        "properties": {"p": "q"},
    }
    assert types.get_all_schemas_response([rec])["getSchemaResponses"][0]["version"] == 3
    assert types.post_schema_response(3) == {"version": {"version": 3}}
    assert types.long_schema_version_response(4) == {"version": 4}
    assert types.compatibility_response(False, "FULL") == {
        "compatibility": False,
        "schemaCompatibilityStrategy": "FULL",
    }
    assert rec.version_bytes == b"\x00" * 7 + b"\x03"


def test_post_payload_key_value_round_trip() -> None:
    value_def = {"type": "record", "name": "V", "fields": [{"name": "x", "type": "long"}]}
    text = json.dumps({"key": "", "value": value_def})
    info = types.schema_info_from_post_payload({"type": "KEY_VALUE", "schema": text}, name="t")
    key, value = types.decode_key_value_data(info.schema_data)
    assert key == b"" and json.loads(value) == value_def
    shown = json.loads(types.definition_text(info))
    assert shown == {"key": "", "value": value_def}


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "NOPE", "schema": ""},
        {"type": "AVRO", "schema": 5},
        {"type": "AVRO", "schema": "", "properties": [1]},
        {"type": "KEY_VALUE", "schema": "not json"},
        {"type": "KEY_VALUE", "schema": '{"key": "x"}'},
        ["not", "an", "object"],
    ],
)
def test_post_payload_malformed(payload: object) -> None:
    with pytest.raises(InvalidSchemaError):
        types.schema_info_from_post_payload(payload, name="t")  # type: ignore[arg-type]


def test_schema_hash_ignores_name_and_properties() -> None:
    a = SchemaInfo("a", SchemaType.JSON, b"{}", {"x": "1"})
    b = SchemaInfo("b", SchemaType.JSON, b"{}", {})
    c = SchemaInfo("a", SchemaType.AVRO, b"{}", {"x": "1"})
    assert a.schema_hash() == b.schema_hash() != c.schema_hash()


def test_errors_carry_wire_codes_and_http_statuses() -> None:
    assert IncompatibleSchemaError("x").server_error == broker_errors.Code.IncompatibleSchema
    assert IncompatibleSchemaError("x").http_status == 409
    assert isinstance(IncompatibleSchemaError("x"), broker_errors.IncompatibleSchemaError)
    assert InvalidSchemaError("x").http_status == 422
    assert InvalidSchemaError("x").server_error == broker_errors.Code.IncompatibleSchema
    assert SchemaNotFoundError("x").server_error == broker_errors.Code.TopicNotFound
    assert SchemaNotFoundError("x").http_status == 404
    err = InvalidSchemaError("bad")
    assert broker_errors.translate(err) is err
