"""Schemas found on the broker: AUTO_CONSUME, AUTO_PRODUCE and decoding by writer version.

Theory of operation: every message carries the ``schema_version`` its
producer registered (8-byte big-endian, empty when schemaless). A
:class:`SchemaResolver` turns (topic, version) into a decoding schema,
fetching the writer's schema once per version (GET_SCHEMA, or the REST
schema endpoint for HTTP service URLs) and caching it:

* for an ``AutoConsumeSchema`` consumer the writer's schema itself decodes
  (``schema_for_wire``: STRING, JSON, AVRO, primitives, KEY_VALUE; no schema
  gives the bytes);
* for an ``AvroSchema`` consumer the writer's Avro definition is resolved
  against the consumer's own (fastavro's reader/writer resolution), so a
  message written with an older or newer compatible version decodes into the
  consumer's shape -- what Java does with schema versions.

The consumer asks the resolver in ``receive()`` (it may await a fetch) and
sets the message's schema before handing it out. ``AutoProduceBytesSchema``
sends bytes already encoded in the topic's schema: ``Client.create_producer``
fetches the topic's schema, registers the producer with it, and every payload
is checked by decoding it before it is sent.
"""

from __future__ import annotations

import json
from typing import Any

from magnetar.client.errors import InvalidConfiguration
from magnetar.client.schema import AvroSchema, BytesSchema, JsonSchema, Schema, StringSchema
from magnetar.client.schema_types import (
    BooleanSchema,
    DoubleSchema,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    KeyValueSchema,
)
from magnetar.common.naming import TopicName
from magnetar.protocol.enums import SchemaType
from magnetar.protocol.wire import WireSchema

_PRIMITIVES: dict[SchemaType, type[Schema]] = {
    SchemaType.BOOLEAN: BooleanSchema, SchemaType.INT8: Int8Schema, SchemaType.INT16: Int16Schema,
    SchemaType.INT32: Int32Schema, SchemaType.INT64: Int64Schema, SchemaType.FLOAT: FloatSchema,
    SchemaType.DOUBLE: DoubleSchema,
}  # fmt: skip


class AutoConsumeSchema(Schema):
    """Decode every message with the schema its producer wrote it with."""

    schema_type = SchemaType.AUTO_CONSUME

    def decode(self, data: bytes) -> Any:
        return data


class AutoProduceBytesSchema(Schema):
    """Send bytes already encoded in the topic's schema (checked before sending)."""

    def __init__(self) -> None:
        self.topic_schema: Schema | None = None
        self.wire: WireSchema | None = None

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidConfiguration("AutoProduceBytesSchema sends bytes")
        data = bytes(value)
        if self.topic_schema is not None:
            try:
                self.topic_schema.decode(data)
            except Exception as exc:
                raise InvalidConfiguration(f"payload does not match the topic's schema: {exc}") from None
        return data

    def decode(self, data: bytes) -> bytes:
        return data

    def wire_schema(self) -> WireSchema | None:
        return self.wire


def _json_definition(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise InvalidConfiguration("the topic's schema definition is not JSON") from None


def schema_for_wire(wire: WireSchema | None) -> Schema:
    """A schema object that decodes what a producer with ``wire`` wrote."""
    if wire is None or wire.type is SchemaType.NONE:
        return BytesSchema()
    t = wire.type
    if t is SchemaType.STRING:
        return StringSchema()
    if t is SchemaType.JSON:
        return JsonSchema(_json_definition(wire.schema_data))
    if t is SchemaType.AVRO:
        return AvroSchema(_json_definition(wire.schema_data))
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]()
    if t is SchemaType.KEY_VALUE:
        data, props = wire.schema_data, wire.properties
        klen = int.from_bytes(data[:4], "big")
        kdata, vdata = data[4 : 4 + klen], data[8 + klen :]

        def part(prefix: str, raw: bytes) -> Schema:
            name = props.get(f"{prefix}.schema.type", "BYTES")
            stype = SchemaType[name] if name in SchemaType.__members__ else SchemaType.NONE
            return schema_for_wire(WireSchema(name, raw, stype))

        encoding = props.get("kv.encoding.type", "INLINE")
        return KeyValueSchema(part("key", kdata), part("value", vdata), encoding)
    return BytesSchema()


class _ResolvedAvro(Schema):
    def __init__(self, writer: dict, reader: AvroSchema) -> None:
        import fastavro

        self._writer = fastavro.parse_schema(writer)
        self._reader = reader

    def decode(self, data: bytes) -> Any:
        import io

        import fastavro

        value = fastavro.schemaless_reader(io.BytesIO(data), self._writer, self._reader._parsed)
        return self._reader._build(value)


class SchemaResolver:
    def __init__(self, client: Any, own: Schema) -> None:
        self._client = client
        self._own = own
        self._cache: dict[tuple[str, bytes], Schema] = {}

    async def schema_for(self, topic: str, version: bytes) -> Schema:
        if not version:
            return self._own if not isinstance(self._own, AutoConsumeSchema) else BytesSchema()
        base = TopicName.get(topic).partitioned_topic_name
        key = (base, version)
        found = self._cache.get(key)
        if found is None:
            info = await self._client.lookup.get_schema(base, version)
            wire = info[0] if info is not None else None
            if isinstance(self._own, AvroSchema) and wire is not None and wire.type is SchemaType.AVRO:
                found = _ResolvedAvro(_json_definition(wire.schema_data), self._own)
            elif isinstance(self._own, AutoConsumeSchema):
                found = schema_for_wire(wire)
            else:
                found = self._own
            self._cache[key] = found
        return found
