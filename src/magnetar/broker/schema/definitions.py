"""Schema definitions: what a well-formed definition is for each schema type.

Theory of operation: nothing is stored before it passes :func:`validate`, so a malformed
definition is refused with :class:`InvalidSchemaError` and a message, never half-registered.
The rules, by type (Pulsar's ``SchemaDataValidator`` in spirit):

* AVRO, JSON, PROTOBUF: the definition is Avro schema JSON (the Python client sends an Avro
  record definition for JSON and AVRO; Java's PROTOBUF type also carries an Avro-style
  definition).  It must parse with ``fastavro.parse_schema``; a record must list its fields.
* PROTOBUF_NATIVE: JSON ``{"fileDescriptorSet": base64, "rootMessageTypeName": ..,
  "rootFileDescriptorName": ..}`` (Java's ``ProtobufNativeSchemaData``, which the Python
  client's ``ProtobufNativeSchema`` also sends); the set must decode and contain the root
  message in the named file.
* KEY_VALUE: both parts decode (see ``types``) and each part is valid for its own type;
  parts may not themselves be KEY_VALUE.
* primitives (STRING, BOOLEAN, INT8..DOUBLE, DATE, TIME, ... and NONE/BYTES): the definition is
  empty; the 4 bytes ``null`` (what the Python client sends for STRING) are accepted too.
* AUTO, AUTO_CONSUME, AUTO_PUBLISH are client-side placeholders and can't be stored.

:class:`AvroParseCache` keeps parsed Avro definitions (bounded LRU keyed by the bytes) so the
transitive strategies don't re-parse every stored version on every check.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from magnetar.broker.schema.errors import InvalidSchemaError
from magnetar.broker.schema.types import SchemaInfo, SchemaType, key_value_parts

_CLIENT_SIDE = (SchemaType.AUTO, SchemaType.AUTO_CONSUME, SchemaType.AUTO_PUBLISH)


@dataclass(frozen=True, slots=True)
class ParsedAvro:
    schema: Any
    named: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProtobufNativeDefinition:
    root_message_type_name: str
    root_file_descriptor_name: str


class AvroParseCache:
    """Bounded LRU of parsed Avro definitions, keyed by the definition bytes."""

    def __init__(self, entries_max: int = 256) -> None:
        self._entries_max = entries_max
        self._entries: OrderedDict[bytes, ParsedAvro] = OrderedDict()

    def parse(self, data: bytes) -> ParsedAvro:
        hit = self._entries.get(data)
        if hit is not None:
            self._entries.move_to_end(data)
            return hit
        parsed = parse_avro(data)
        self._entries[data] = parsed
        if len(self._entries) > self._entries_max:
            self._entries.popitem(last=False)
        return parsed


def parse_avro(data: bytes) -> ParsedAvro:
    """Parse an Avro schema definition; InvalidSchemaError with the parser's reason if broken."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidSchemaError(f"Invalid schema definition: not valid JSON: {e}") from None
    if isinstance(raw, dict) and raw.get("type") == "record" and not isinstance(raw.get("fields"), list):
        raise InvalidSchemaError("Invalid schema definition: a record must have a 'fields' list")
    named: dict[str, Any] = {}
    try:
        import fastavro  # only when an Avro schema is registered (a few MiB resident)

        parsed = fastavro.parse_schema(raw, named_schemas=named, _write_hint=False)
    except RecursionError:
        raise InvalidSchemaError("Invalid schema definition: nested too deeply") from None
    except Exception as e:  # fastavro raises SchemaParseException, UnknownType, KeyError...
        raise InvalidSchemaError(f"Invalid schema definition: {type(e).__name__}: {e}") from None
    _check_structure(parsed, named, set(), 0)
    return ParsedAvro(parsed, named)


_NAMED_KINDS = ("record", "error", "enum", "fixed")
_STRUCTURE_DEPTH_MAX = 64


def _check_structure(schema: Any, named: dict[str, Any], seen: set[str], depth: int) -> None:
    """What Avro's Java parser refuses and fastavro lets through: duplicate field names,
    duplicate union branches and unions directly inside unions."""
    if depth > _STRUCTURE_DEPTH_MAX:
        raise InvalidSchemaError("Invalid schema definition: nested too deeply")
    if isinstance(schema, str):
        if schema in named and schema not in seen:
            seen.add(schema)
            _check_structure(named[schema], named, seen, depth + 1)
        return
    if isinstance(schema, list):
        branches: set[str] = set()
        for branch in schema:
            if isinstance(branch, list):
                raise InvalidSchemaError("Invalid schema definition: a union may not contain a union")
            key = _branch_key(branch, named)
            if key in branches:
                raise InvalidSchemaError(f"Invalid schema definition: duplicate {key} in union")
            branches.add(key)
            _check_structure(branch, named, seen, depth + 1)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind in ("record", "error"):
        name = schema.get("name", "")
        if name in seen and depth > 0:
            return
        seen.add(name)
        names: set[str] = set()
        for f in schema.get("fields", []):
            if f["name"] in names:
                raise InvalidSchemaError(
                    f"Invalid schema definition: duplicate field {f['name']} in record {name}"
                )
            names.add(f["name"])
            _check_structure(f["type"], named, seen, depth + 1)
    elif kind == "array":
        _check_structure(schema.get("items"), named, seen, depth + 1)
    elif kind == "map":
        _check_structure(schema.get("values"), named, seen, depth + 1)
    elif not isinstance(kind, str):
        _check_structure(kind, named, seen, depth + 1)


def _branch_key(branch: Any, named: dict[str, Any]) -> str:
    """Union branches must differ by type, named types by full name."""
    if isinstance(branch, str):
        return f"type {branch}" if branch not in named else f"named type {branch}"
    if isinstance(branch, dict):
        kind = branch.get("type")
        if kind in _NAMED_KINDS:
            return f"named type {branch.get('name')}"
        return f"type {kind}"
    return f"type {branch!r}"


def parse_protobuf_native(data: bytes) -> ProtobufNativeDefinition:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidSchemaError(f"Invalid PROTOBUF_NATIVE schema: not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise InvalidSchemaError("Invalid PROTOBUF_NATIVE schema: expected a JSON object")
    fields = ("fileDescriptorSet", "rootMessageTypeName", "rootFileDescriptorName")
    missing = [f for f in fields if not isinstance(raw.get(f), str) or not raw.get(f)]
    if missing:
        raise InvalidSchemaError(f"Invalid PROTOBUF_NATIVE schema: missing {', '.join(missing)}")
    try:
        fds = descriptor_pb2.FileDescriptorSet.FromString(
            base64.b64decode(raw["fileDescriptorSet"], validate=True)
        )
    except (binascii.Error, ValueError, DecodeError) as e:
        raise InvalidSchemaError(f"Invalid PROTOBUF_NATIVE schema: bad fileDescriptorSet: {e}") from None
    root, file_name = raw["rootMessageTypeName"], raw["rootFileDescriptorName"]
    for f in fds.file:
        if f.name != file_name:
            continue
        prefix = f"{f.package}." if f.package else ""
        if any(prefix + m.name == root for m in f.message_type):
            return ProtobufNativeDefinition(root, file_name)
        raise InvalidSchemaError(f"Invalid PROTOBUF_NATIVE schema: message {root} not found in {file_name}")
    raise InvalidSchemaError(f"Invalid PROTOBUF_NATIVE schema: file {file_name} not in the descriptor set")


def validate(info: SchemaInfo, cache: AvroParseCache | None = None, *, nested: bool = False) -> None:
    """Raise InvalidSchemaError unless ``info`` is a well-formed, storable definition."""
    t = info.type
    if t in _CLIENT_SIDE:
        raise InvalidSchemaError(f"Schema type {t.name} is resolved by the client and cannot be stored")
    if t.is_struct:
        (cache.parse if cache else parse_avro)(info.schema_data)
    elif t is SchemaType.PROTOBUF_NATIVE:
        parse_protobuf_native(info.schema_data)
    elif t is SchemaType.KEY_VALUE:
        if nested:
            raise InvalidSchemaError("Invalid KEY_VALUE schema: a part cannot itself be KEY_VALUE")
        key, value = key_value_parts(info)
        validate(key, cache, nested=True)
        validate(value, cache, nested=True)
    elif info.schema_data not in (b"", b"null"):
        raise InvalidSchemaError(
            f"Invalid schema definition data for primitive schemas: length of schema data should be "
            f"zero, but {len(info.schema_data)} bytes is found"
        )
