"""Schemas: how values become message bytes, and what the broker is told about them.

Theory of operation: a schema has ``encode(value) -> bytes``,
``decode(bytes) -> value`` and ``wire_schema()``, the ``Schema`` message sent
in PRODUCER / SUBSCRIBE (None for BytesSchema: the official client sends no
schema field for bytes). The wire form copies the official Python client so
the broker sees the same schema from both and compatibility checks agree:
``name`` is the upper-case type name, ``schema_data`` is ``json.dumps`` of the
definition (the 4 bytes ``null`` for STRING), no properties.

* ``StringSchema``: UTF-8 text.
* ``JsonSchema(definition)`` and ``AvroSchema(definition)``: ``definition`` is
  an Avro record definition (a dict, or a class with a ``schema()`` method
  returning one, as ``pulsar.schema.Record`` classes have). JSON encodes with
  ``json.dumps``; Avro with fastavro's schemaless binary encoding, which is
  what the official client writes. Both decode to dicts, or to instances of
  ``record_class`` when one is given.
"""

from __future__ import annotations

import io
import json
from typing import Any

from magnetar.client.errors import InvalidConfiguration
from magnetar.protocol.enums import SchemaType
from magnetar.protocol.wire import WireSchema


class Schema:
    schema_type = SchemaType.NONE

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def wire_schema(self) -> WireSchema | None:
        return None


class BytesSchema(Schema):
    def encode(self, value: Any) -> bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidConfiguration(f"BytesSchema needs bytes, got {type(value).__name__}")
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return data


class StringSchema(Schema):
    schema_type = SchemaType.STRING

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise InvalidConfiguration(f"StringSchema needs str, got {type(value).__name__}")
        return value.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")

    def wire_schema(self) -> WireSchema:
        return WireSchema("STRING", b"null", SchemaType.STRING)


def _definition(record: Any) -> dict:
    if isinstance(record, dict):
        return record
    schema = getattr(record, "schema", None)
    if callable(schema):
        return schema()
    raise InvalidConfiguration("a JSON/Avro schema needs a record definition dict or a class with schema()")


def _as_dict(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    raise InvalidConfiguration(f"cannot encode {type(value).__name__} as a record")


class _RecordSchema(Schema):
    type_name = ""

    def __init__(self, record: Any, record_class: type | None = None) -> None:
        self.definition = _definition(record)
        self.record_class = record_class or (record if isinstance(record, type) else None)

    def _build(self, data: dict) -> Any:
        if self.record_class is None:
            return data
        obj = self.record_class.__new__(self.record_class)
        obj.__dict__.update(data)
        return obj

    def wire_schema(self) -> WireSchema:
        return WireSchema(self.type_name, json.dumps(self.definition).encode(), self.schema_type)


class JsonSchema(_RecordSchema):
    schema_type = SchemaType.JSON
    type_name = "JSON"

    def encode(self, value: Any) -> bytes:
        return json.dumps(_as_dict(value)).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return self._build(json.loads(data))


class AvroSchema(_RecordSchema):
    schema_type = SchemaType.AVRO
    type_name = "AVRO"

    def __init__(self, record: Any, record_class: type | None = None) -> None:
        import fastavro

        super().__init__(record, record_class)
        self._parsed = fastavro.parse_schema(self.definition)

    def encode(self, value: Any) -> bytes:
        import fastavro

        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, self._parsed, _as_dict(value))
        return buf.getvalue()

    def decode(self, data: bytes) -> Any:
        import fastavro

        return self._build(fastavro.schemaless_reader(io.BytesIO(data), self._parsed))
