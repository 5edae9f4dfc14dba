"""Between the binary protocol's ``Schema`` message and the registry's :class:`SchemaInfo`.

Theory of operation: PRODUCER and SUBSCRIBE carry an optional ``schema`` field (only for
STRING, JSON, AVRO, PROTOBUF, PROTOBUF_NATIVE and KEY_VALUE -- the client sends nothing for
BYTES and the numeric primitives, which the broker then sees as schemaless); GET_SCHEMA_RESPONSE
and GET_OR_CREATE_SCHEMA carry one back.  These two functions are the whole translation, so
handlers never touch type numbers: the proto ``Schema.Type`` numbers 0..20 are Java's
``SchemaType`` values, 21 (AutoConsume in newer protos) is AUTO_CONSUME, anything else is an
:class:`InvalidSchemaError`.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker.schema.types import SchemaInfo, SchemaType
from magnetar.protocol.enums import SchemaType as WireSchemaType
from magnetar.protocol.wire import WireSchema


def schema_info_from_pb(schema: Any) -> SchemaInfo:
    """A decoded proto ``Schema`` message (or a :class:`WireSchema`) as a SchemaInfo."""
    props = schema.properties
    properties = dict(props) if isinstance(props, dict) else {kv.key: kv.value for kv in props}
    return SchemaInfo(
        str(schema.name), SchemaType.from_proto(int(schema.type)), bytes(schema.schema_data), properties
    )


def schema_info_from_command(cmd: Any) -> SchemaInfo | None:
    """The schema of a PRODUCER / SUBSCRIBE / GET_OR_CREATE_SCHEMA command; None when absent."""
    if not cmd.HasField("schema"):
        return None
    return schema_info_from_pb(cmd.schema)


def to_wire_schema(info: SchemaInfo) -> WireSchema:
    """For ``commands.get_schema_response(request_id, to_wire_schema(rec.info), rec.version_bytes)``."""
    return WireSchema(
        info.name, info.schema_data, WireSchemaType(info.type.to_proto()), dict(info.properties)
    )
