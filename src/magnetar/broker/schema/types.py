"""Schema vocabulary: types, schema infos, versions, KeyValue encoding and the REST shapes.

Theory of operation: a schema is a :class:`SchemaInfo` -- ``name``, ``type``, the definition
bytes (``schema_data``) and string ``properties`` -- exactly the four fields of the wire
``Schema`` message.  :class:`SchemaType` carries Java's ``SchemaType`` values: 0..20 are the
proto's ``Schema.Type`` numbers, the negative ones exist only in clients (BYTES = -1 means
"no schema" and is never sent; AUTO_CONSUME = -3 and AUTO_PUBLISH = -4 are resolved by the
client from the topic's schema).  Newer protos send AUTO_CONSUME as 21 (:meth:`from_proto`).

Versions (:class:`SchemaVersion`) are Java's ``LongSchemaVersion``: a per-topic counter from 0
that goes on the wire as 8 bytes, big-endian, signed; "no schema" is the empty byte string.

KeyValue schemas (type 15) pack two schemas into one: ``schema_data`` is
``int32 key_len | key bytes | int32 value_len | value bytes`` (big-endian lengths, -1 for an
absent part), and the parts' types, names and properties travel in the properties
``key.schema.type``/``key.schema.name``/``key.schema.properties`` (a JSON object), the same for
``value.``, plus ``kv.encoding.type`` (INLINE or SEPARATED).  That is Java's
``KeyValueSchemaInfo`` layout, which the C++ client (and so the Python one) also produces.

The admin REST speaks JSON: :func:`get_schema_response`, :func:`schema_info_from_post_payload`
and friends build/parse Pulsar's ``GetSchemaResponse``/``PostSchemaPayload`` shapes.  For
KEY_VALUE the REST ``data``/``schema`` is a JSON text ``{"key": ..., "value": ...}``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar.broker.schema.errors import InvalidSchemaError, InvalidSchemaVersionError


class SchemaType(enum.IntEnum):
    """Java ``SchemaType`` (the names are the admin REST ``type`` strings)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20
    # Client-side only; never stored.
    BYTES = -1
    AUTO = -2
    AUTO_CONSUME = -3
    AUTO_PUBLISH = -4

    @classmethod
    def from_proto(cls, value: int) -> SchemaType:
        """The wire ``Schema.Type`` number (21 = AutoConsume in newer protos; 22 External is refused)."""
        if 0 <= value <= 20:
            return cls(value)
        if value == 21:
            return cls.AUTO_CONSUME
        raise InvalidSchemaError(f"Unknown schema type {value} on the wire")

    def to_proto(self) -> int:
        """The wire number for a type a broker sends (stored types only)."""
        if self.value < 0:
            raise InvalidSchemaError(f"Schema type {self.name} is client-side only and has no wire form")
        return int(self.value)

    @classmethod
    def from_name(cls, name: str) -> SchemaType:
        """A REST type name (``"AVRO"``, ``"key_value"``...); InvalidSchemaError if unknown."""
        key = str(name).strip().upper()
        if key == "BOOL":
            key = "BOOLEAN"
        try:
            return cls[key]
        except KeyError:
            raise InvalidSchemaError(f"Unknown schema type '{name}'") from None

    @property
    def is_struct(self) -> bool:
        """Types whose definition is an Avro-style record definition."""
        return self in (SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF)


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """One schema: the four fields of the wire ``Schema`` message."""

    name: str
    type: SchemaType
    schema_data: bytes = b""
    properties: Mapping[str, str] = field(default_factory=dict)

    def schema_hash(self) -> str:
        """Identity of the schema for version reuse: SHA-256 over type and definition.

        As Pulsar's ``SchemaHash``: name and properties do not take part -- except, for
        KEY_VALUE, the parts' types and the encoding, which live in the properties (two
        KeyValue schemas with empty STRING and INT64 keys have the same bytes).
        """
        h = hashlib.sha256()
        h.update(struct.pack(">i", int(self.type)))
        h.update(self.schema_data)
        if self.type is SchemaType.KEY_VALUE:
            for key in (KV_KEY_PREFIX + "type", KV_VALUE_PREFIX + "type", KV_ENCODING_TYPE):
                h.update(b"\x00" + str(self.properties.get(key, "")).encode())
        return h.hexdigest()

    def size_bytes(self) -> int:
        """What the size limit counts: definition, name and properties."""
        n = len(self.schema_data) + len(self.name.encode())
        for k, v in self.properties.items():
            n += len(str(k).encode()) + len(str(v).encode())
        return n


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """A ``LongSchemaVersion``: 0, 1, 2 ... per topic; 8 bytes big-endian on the wire."""

    value: int

    EMPTY = b""  # "no schema" on the wire (PRODUCER_SUCCESS of a schemaless producer)
    LATEST = -1  # GET_SCHEMA with version -1 (or none) asks for the latest

    def __post_init__(self) -> None:
        if not 0 <= self.value < 2**63:
            raise InvalidSchemaVersionError(f"Schema version {self.value} out of range")

    def to_bytes(self) -> bytes:
        return struct.pack(">q", self.value)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> SchemaVersion | None:
        """Decode wire bytes; None for "no schema"/"latest" (empty, absent or -1)."""
        if not data:
            return None
        if len(data) != 8:
            raise InvalidSchemaVersionError(
                f"Invalid schema version: expected 8 bytes (big-endian long), got {len(data)}"
            )
        (n,) = struct.unpack(">q", data)
        if n == cls.LATEST:
            return None
        if n < 0:
            raise InvalidSchemaVersionError(f"Invalid schema version {n}")
        return cls(n)


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    """A stored version: the schema plus when it was written; ``deleted`` marks a deletion."""

    version: int
    info: SchemaInfo
    timestamp_ms: int
    deleted: bool = False

    @property
    def version_bytes(self) -> bytes:
        return SchemaVersion(self.version).to_bytes()


# --------------------------------------------------------------------------- KeyValue

KV_KEY_PREFIX = "key.schema."
KV_VALUE_PREFIX = "value.schema."
KV_ENCODING_TYPE = "kv.encoding.type"


def encode_key_value_data(key: bytes | None, value: bytes | None) -> bytes:
    """``int32 len | key | int32 len | value``; a None part is written as length -1."""
    out = bytearray()
    for part in (key, value):
        if part is None:
            out += struct.pack(">i", -1)
        else:
            out += struct.pack(">i", len(part)) + part
    return bytes(out)


def decode_key_value_data(data: bytes) -> tuple[bytes, bytes]:
    """Split KeyValue ``schema_data``; an absent (-1) part comes back empty."""
    parts: list[bytes] = []
    pos = 0
    for which in ("key", "value"):
        if len(data) - pos < 4:
            raise InvalidSchemaError(f"Invalid KeyValue schema data: truncated before the {which} length")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < -1 or n > len(data) - pos:
            raise InvalidSchemaError(f"Invalid KeyValue schema data: bad {which} length {n}")
        n = max(n, 0)
        parts.append(bytes(data[pos : pos + n]))
        pos += n
    if pos != len(data):
        raise InvalidSchemaError(f"Invalid KeyValue schema data: {len(data) - pos} trailing bytes")
    return parts[0], parts[1]


def key_value_parts(info: SchemaInfo) -> tuple[SchemaInfo, SchemaInfo]:
    """The key and value schemas inside a KEY_VALUE schema (a missing part type means BYTES)."""
    key_data, value_data = decode_key_value_data(info.schema_data)
    out = []
    for prefix, data in ((KV_KEY_PREFIX, key_data), (KV_VALUE_PREFIX, value_data)):
        props = info.properties
        type_name = props.get(prefix + "type", "BYTES")
        part_type = SchemaType.from_name(type_name)
        raw_props = props.get(prefix + "properties") or "{}"
        try:
            part_props = json.loads(raw_props)
        except ValueError as e:
            raise InvalidSchemaError(f"Invalid KeyValue {prefix}properties: {e}") from None
        if not isinstance(part_props, dict):
            raise InvalidSchemaError(f"Invalid KeyValue {prefix}properties: not a JSON object")
        name = props.get(prefix + "name", part_type.name)
        out.append(SchemaInfo(name, part_type, data, {str(k): str(v) for k, v in part_props.items()}))
    return out[0], out[1]


def make_key_value_schema_info(
    name: str, key: SchemaInfo, value: SchemaInfo, encoding: str = "INLINE"
) -> SchemaInfo:
    """Build a KEY_VALUE schema from its parts (Java's ``KeyValueSchemaInfo.encodeKeyValueSchemaInfo``)."""
    props: dict[str, str] = {KV_ENCODING_TYPE: encoding}
    for prefix, part in ((KV_KEY_PREFIX, key), (KV_VALUE_PREFIX, value)):
        props[prefix + "name"] = part.name
        props[prefix + "type"] = part.type.name
        props[prefix + "properties"] = json.dumps(dict(part.properties), sort_keys=True)
    return SchemaInfo(
        name, SchemaType.KEY_VALUE, encode_key_value_data(key.schema_data, value.schema_data), props
    )


# --------------------------------------------------------------------------- admin REST shapes


def definition_text(info: SchemaInfo) -> str:
    """The REST ``data`` string: the definition as text; for KEY_VALUE ``{"key":..,"value":..}``."""
    if info.type is SchemaType.KEY_VALUE:
        key, value = decode_key_value_data(info.schema_data)
        return json.dumps({"key": _part_to_json(key), "value": _part_to_json(value)})
    return info.schema_data.decode("utf-8", errors="replace")


def _part_to_json(data: bytes) -> Any:
    text = data.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return parsed if isinstance(parsed, dict | list) else text


def _part_from_json(part: Any) -> bytes:
    if part is None:
        return b""
    if isinstance(part, str):
        return part.encode()
    return json.dumps(part).encode()


def schema_info_from_post_payload(payload: Mapping[str, Any], name: str) -> SchemaInfo:
    """A ``PostSchemaPayload`` (``type``, ``schema``, ``properties``) as a SchemaInfo."""
    if not isinstance(payload, Mapping):
        raise InvalidSchemaError("Invalid schema payload: expected a JSON object")
    stype = SchemaType.from_name(payload.get("type") or "NONE")
    text = payload.get("schema") or ""
    if not isinstance(text, str):
        raise InvalidSchemaError("Invalid schema payload: 'schema' must be a string")
    props_raw = payload.get("properties") or {}
    if not isinstance(props_raw, Mapping):
        raise InvalidSchemaError("Invalid schema payload: 'properties' must be an object")
    props = {str(k): str(v) for k, v in props_raw.items()}
    if stype is SchemaType.KEY_VALUE:
        try:
            kv = json.loads(text)
        except ValueError as e:
            raise InvalidSchemaError(f"Invalid KEY_VALUE schema: {e}") from None
        if not isinstance(kv, dict) or "key" not in kv or "value" not in kv:
            raise InvalidSchemaError('Invalid KEY_VALUE schema: expected {"key": ..., "value": ...}')
        data = encode_key_value_data(_part_from_json(kv["key"]), _part_from_json(kv["value"]))
        return SchemaInfo(name, stype, data, props)
    return SchemaInfo(name, stype, text.encode(), props)


def get_schema_response(record: SchemaRecord) -> dict[str, Any]:
    """Pulsar's ``GetSchemaResponse``."""
    return {
        "version": record.version,
        "type": record.info.type.name,
        "timestamp": record.timestamp_ms,
        "data": definition_text(record.info),
        "properties": dict(record.info.properties),
    }


def get_all_schemas_response(records: list[SchemaRecord]) -> dict[str, Any]:
    return {"getSchemaResponses": [get_schema_response(r) for r in records]}


def post_schema_response(version: int) -> dict[str, Any]:
    return {"version": {"version": version}}


def long_schema_version_response(version: int) -> dict[str, Any]:
    """DELETE ``/schema`` and POST ``/version`` answer ``{"version": N}``."""
    return {"version": version}


def compatibility_response(compatible: bool, strategy_name: str) -> dict[str, Any]:
    return {"compatibility": compatible, "schemaCompatibilityStrategy": strategy_name}
