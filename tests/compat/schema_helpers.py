"""Helpers of the schema compat tests: REST calls and the schemas pulsar.schema lacks.

The Python client (pulsar-client 3.13) has String, Bytes, Json, Avro and
ProtobufNative schemas; the C++ core underneath also knows the primitive types,
KEY_VALUE and AUTO_CONSUME (``_pulsar.SchemaType``).  The small Schema
subclasses below give the client those, the way a Python user would: a
``_pulsar.SchemaInfo`` with the type and definition, plus encode/decode.
"""

from __future__ import annotations

import struct
import uuid

import _pulsar
import httpx
from pulsar.schema import Schema

V2 = "/admin/v2"


class PrimitiveSchema(Schema):
    FORMATS = {
        _pulsar.SchemaType.INT8: ">b",
        _pulsar.SchemaType.INT16: ">h",
        _pulsar.SchemaType.INT32: ">i",
        _pulsar.SchemaType.INT64: ">q",
        _pulsar.SchemaType.FLOAT: ">f",
        _pulsar.SchemaType.DOUBLE: ">d",
    }

    def __init__(self, schema_type: _pulsar.SchemaType) -> None:
        self._record_cls = object
        self._fmt = self.FORMATS[schema_type]
        self._schema_info = _pulsar.SchemaInfo(schema_type, schema_type.name, "")

    def encode(self, obj):  # type: ignore[no-untyped-def]
        return struct.pack(self._fmt, obj)

    def decode(self, data):  # type: ignore[no-untyped-def]
        return struct.unpack(self._fmt, data)[0]


class AutoConsumeSchema(Schema):
    """AUTO_CONSUME: the consumer takes whatever the topic has; we decode with the version's schema."""

    def __init__(self) -> None:
        self._record_cls = object
        self._schema_info = _pulsar.SchemaInfo(_pulsar.SchemaType.AUTO_CONSUME, "AUTO_CONSUME", "")

    def encode(self, obj):  # type: ignore[no-untyped-def]
        raise TypeError("AUTO_CONSUME cannot produce")

    def decode(self, data):  # type: ignore[no-untyped-def]
        return data


class KeyValueBytesSchema(Schema):
    """KEY_VALUE<BYTES, BYTES> with INLINE encoding, as far as the Python binding can say it.

    ``_pulsar.SchemaInfo`` has no properties, so the part types (``key.schema.type`` ...) are
    absent, which means BYTES for both parts; the definition is Pulsar's binary KeyValue layout
    with two empty parts (4-byte big-endian length 0, twice).  Values are encoded the same way:
    ``len | key | len | value``.
    """

    def __init__(self) -> None:
        self._record_cls = tuple
        data = struct.pack(">ii", 0, 0)
        self._schema_info = _pulsar.SchemaInfo(_pulsar.SchemaType.KEY_VALUE, "KeyValue", data.decode("ascii"))

    def encode(self, obj):  # type: ignore[no-untyped-def]
        key, value = obj
        return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value

    def decode(self, data):  # type: ignore[no-untyped-def]
        (kl,) = struct.unpack(">i", data[:4])
        key = data[4 : 4 + kl]
        (vl,) = struct.unpack(">i", data[4 + kl : 8 + kl])
        return key, data[8 + kl : 8 + kl + vl]


def rest_path(topic: str) -> str:
    """persistent://t/ns/x -> /admin/v2/schemas/t/ns/x"""
    return f"{V2}/schemas/" + topic.split("://", 1)[1]


def new_namespace(http: httpx.Client, strategy: str | None = None) -> str:
    ns = f"public/schema-{uuid.uuid4().hex[:8]}"
    r = http.put(f"{V2}/namespaces/{ns}", json={})
    assert r.status_code == 204, r.text
    if strategy is not None:
        r = http.put(f"{V2}/namespaces/{ns}/schemaCompatibilityStrategy", json=strategy)
        assert r.status_code == 204, r.text
    return ns
