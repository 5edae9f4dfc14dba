"""Primitive and KeyValue schemas, encoded as Pulsar's Java schemas encode them.

Theory of operation: the primitive schemas (BOOLEAN, INT8..INT64, FLOAT,
DOUBLE) write fixed-size big-endian values, exactly as Java's
``ByteSchema``/``ShortSchema``/``IntSchema``/``LongSchema``/``FloatSchema``/
``DoubleSchema``/``BooleanSchema`` do; their ``Schema`` on the wire has the
upper-case type name and empty data. ``KeyValueSchema(key, value)`` with the
INLINE encoding writes ``[u32 key size][key bytes][u32 value size][value
bytes]`` and announces itself as KEY_VALUE with Java's schema-info layout:
data ``[u32 len][key schema data][u32 len][value schema data]`` and the
properties ``key.schema.name/type/properties``,
``value.schema.name/type/properties`` and ``kv.encoding.type``. With the
SEPARATED encoding the payload is the value alone and the key travels as the
message key, base64 with ``partition_key_b64_encoded`` set (as Java's
``TypedMessageBuilder`` writes it); the producer calls ``encode_separated``
and ``Message.value()`` calls ``decode_separated`` with the key's bytes (a
key without the base64 flag -- e.g. from a client without KeyValue schemas --
is its UTF-8 bytes, as Java's ``getKeyBytes``).
"""

from __future__ import annotations

import json
import struct
from typing import Any

from magnetar.client.errors import InvalidConfiguration
from magnetar.client.schema import BytesSchema, Schema
from magnetar.protocol.enums import SchemaType
from magnetar.protocol.wire import WireSchema

_U32 = struct.Struct(">I")


class _Primitive(Schema):
    fmt = ""

    def __init__(self) -> None:
        self._struct = struct.Struct(self.fmt)

    def encode(self, value: Any) -> bytes:
        try:
            return self._struct.pack(value)
        except (struct.error, TypeError) as exc:
            raise InvalidConfiguration(f"{type(self).__name__} cannot encode {value!r}: {exc}") from None

    def decode(self, data: bytes) -> Any:
        if len(data) != self._struct.size:
            raise InvalidConfiguration(
                f"{type(self).__name__}: {len(data)} bytes, expected {self._struct.size}"
            )
        return self._struct.unpack(data)[0]

    def wire_schema(self) -> WireSchema:
        return WireSchema(self.schema_type.name, b"", self.schema_type)


class BooleanSchema(_Primitive):
    schema_type, fmt = SchemaType.BOOLEAN, ">?"


class Int8Schema(_Primitive):
    schema_type, fmt = SchemaType.INT8, ">b"


class Int16Schema(_Primitive):
    schema_type, fmt = SchemaType.INT16, ">h"


class Int32Schema(_Primitive):
    schema_type, fmt = SchemaType.INT32, ">i"


class Int64Schema(_Primitive):
    schema_type, fmt = SchemaType.INT64, ">q"


class FloatSchema(_Primitive):
    schema_type, fmt = SchemaType.FLOAT, ">f"


class DoubleSchema(_Primitive):
    schema_type, fmt = SchemaType.DOUBLE, ">d"


def _info_parts(schema: Schema) -> tuple[bytes, str, str, dict[str, str]]:
    wire = schema.wire_schema()
    if wire is None:
        return b"", "BYTES", "BYTES", {}
    return wire.schema_data, wire.name, wire.type.name, wire.properties


class KeyValueSchema(Schema):
    schema_type = SchemaType.KEY_VALUE

    def __init__(self, key_schema: Schema | None = None, value_schema: Schema | None = None,
                 encoding: str = "INLINE") -> None:  # fmt: skip
        self.encoding = str(getattr(encoding, "name", encoding)).upper()
        if self.encoding not in ("INLINE", "SEPARATED"):
            raise InvalidConfiguration(f"KeyValue encoding must be INLINE or SEPARATED, not {encoding!r}")
        self.separated = self.encoding == "SEPARATED"
        self.key_schema = key_schema or BytesSchema()
        self.value_schema = value_schema or BytesSchema()

    def encode(self, value: Any) -> bytes:
        """The INLINE payload (with SEPARATED, the payload is ``encode_separated(value)[1]``)."""
        if not isinstance(value, tuple) or len(value) != 2:
            raise InvalidConfiguration("KeyValueSchema encodes (key, value) tuples")
        if self.separated:
            return self.encode_separated(value)[1]
        k, v = self.key_schema.encode(value[0]), self.value_schema.encode(value[1])
        return _U32.pack(len(k)) + k + _U32.pack(len(v)) + v

    def encode_separated(self, value: Any) -> tuple[bytes | None, bytes]:
        """(key bytes, or None for a None key; value bytes) of a (key, value) tuple."""
        if not isinstance(value, tuple) or len(value) != 2:
            raise InvalidConfiguration("KeyValueSchema encodes (key, value) tuples")
        key = None if value[0] is None else self.key_schema.encode(value[0])
        return key, self.value_schema.encode(value[1])

    def decode_separated(self, key: bytes | None, data: bytes) -> tuple[Any, Any]:
        return (None if key is None else self.key_schema.decode(key)), self.value_schema.decode(data)

    def decode(self, data: bytes) -> tuple[Any, Any]:
        if self.separated:  # the key is not in the payload (Message.value() passes it)
            return None, self.value_schema.decode(data)
        if len(data) < 8:
            raise InvalidConfiguration("KeyValue payload too short")
        klen = _U32.unpack_from(data, 0)[0]
        if 4 + klen + 4 > len(data):
            raise InvalidConfiguration("KeyValue key size exceeds the payload")
        key = data[4 : 4 + klen]
        vlen = _U32.unpack_from(data, 4 + klen)[0]
        value = data[8 + klen : 8 + klen + vlen]
        if len(value) != vlen:
            raise InvalidConfiguration("KeyValue value size exceeds the payload")
        return self.key_schema.decode(key), self.value_schema.decode(value)

    def wire_schema(self) -> WireSchema:
        kdata, kname, ktype, kprops = _info_parts(self.key_schema)
        vdata, vname, vtype, vprops = _info_parts(self.value_schema)
        props = {
            "key.schema.name": kname,
            "key.schema.type": ktype,
            "key.schema.properties": json.dumps(kprops),
            "value.schema.name": vname,
            "value.schema.type": vtype,
            "value.schema.properties": json.dumps(vprops),
            "kv.encoding.type": self.encoding,
        }
        data = _U32.pack(len(kdata)) + kdata + _U32.pack(len(vdata)) + vdata
        return WireSchema("KeyValue", data, SchemaType.KEY_VALUE, props)
