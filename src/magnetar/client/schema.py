"""Schemas: how values become message bytes, and what the broker is told about them.

Theory of operation: a schema has ``encode(value) -> bytes``,
``decode(bytes) -> value`` and ``wire_schema()``, the ``Schema`` message sent
in PRODUCER / SUBSCRIBE (None for BytesSchema: the official client sends no
schema field for bytes). The wire form copies the official Python client so
the broker sees the same schema from both and compatibility checks agree:
``name`` is the upper-case type name, ``schema_data`` is ``json.dumps`` of the
definition with ``indent=True`` (the 4 bytes ``null`` for STRING), no
properties -- byte for byte what the official client registers.

* ``StringSchema``: UTF-8 text.
* ``JsonSchema(definition)`` and ``AvroSchema(definition)``: ``definition`` is
  an Avro record definition (a dict, or a class with a ``schema()`` method
  returning one, as ``pulsar.schema.Record`` classes have). JSON encodes with
  ``json.dumps``; Avro with fastavro's schemaless binary encoding, which is
  what the official client writes. Both decode to dicts, or to instances of
  ``record_class`` when one is given.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from magnetar.client.errors import InvalidConfiguration
from magnetar.protocol.enums import SchemaType
from magnetar.protocol.wire import WireSchema


class Schema:
    schema_type = SchemaType.NONE
    separated = False  # KeyValue with SEPARATED encoding: the key is the message key

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
        # indent=True as the official Python client writes it, so the registry sees identical bytes
        return WireSchema(self.type_name, json.dumps(self.definition, indent=True).encode(), self.schema_type)


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


class ProtobufNativeSchema(Schema):
    """A generated protobuf message class, in its native binary encoding (PROTOBUF_NATIVE).

    The definition is Java's ``ProtobufNativeSchemaData``: the base64 FileDescriptorSet of the
    message's file and its dependencies (dependencies first), the root message's full name and
    its file's name -- as the official Python client builds it.
    """

    schema_type = SchemaType.PROTOBUF_NATIVE

    def __init__(self, record_cls: type) -> None:
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import Message as ProtobufMessage

        if not (isinstance(record_cls, type) and issubclass(record_cls, ProtobufMessage)):
            raise InvalidConfiguration(
                f"ProtobufNativeSchema needs a protobuf message class, not {record_cls!r}"
            )
        self.record_class = record_cls
        fds = descriptor_pb2.FileDescriptorSet()
        seen: set[str] = set()

        def collect(fd: Any) -> None:
            if fd.name in seen:
                return
            for dep in fd.dependencies:
                collect(dep)
            seen.add(fd.name)
            proto = descriptor_pb2.FileDescriptorProto()
            fd.CopyToProto(proto)
            fds.file.append(proto)

        descriptor = record_cls.DESCRIPTOR  # type: ignore[attr-defined]
        collect(descriptor.file)
        self.definition = {
            "fileDescriptorSet": base64.b64encode(fds.SerializeToString()).decode(),
            "rootMessageTypeName": descriptor.full_name,
            "rootFileDescriptorName": descriptor.file.name,
        }

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, self.record_class):
            raise InvalidConfiguration(f"ProtobufNativeSchema encodes {self.record_class.__name__}")
        return value.SerializeToString()

    def decode(self, data: bytes) -> Any:
        return self.record_class.FromString(data)  # type: ignore[attr-defined]

    def wire_schema(self) -> WireSchema:
        data = json.dumps(self.definition, indent=True).encode()
        return WireSchema("PROTOBUF_NATIVE", data, SchemaType.PROTOBUF_NATIVE)
