"""Small shared pieces of the command builders: ids, schemas, key-values, optional fields.

Theory of operation: builders in ``server_commands`` and ``client_commands``
fill protobuf sub-messages through these helpers so the proto2 rules are
applied in one place: uint64 ids accept -1 (written as 2^64-1, as Java does
for request_id -1), MessageIdData always gets ledgerId and entryId, and a
schema always gets its three required fields; optional scalars and the
``FeatureFlags`` of CONNECT/CONNECTED stay absent when given as None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from magnetar.protocol.enums import SchemaType
from magnetar.protocol.message_id import MessageId, to_unsigned64

__all__ = [
    "WireSchema",
    "u64",
    "fill_message_id",
    "fill_key_values",
    "fill_schema",
    "set_present",
    "fill_feature_flags",
]


def u64(value: int) -> int:
    """A uint64 field value; -1 (Java's "no request") becomes 2^64-1."""
    return to_unsigned64(value)


@dataclass(frozen=True, slots=True)
class WireSchema:
    """The ``Schema`` message: name, definition bytes, type and properties."""

    name: str
    schema_data: bytes
    type: SchemaType
    properties: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_pb(cls, schema: Any) -> WireSchema:
        try:
            stype = SchemaType(schema.type)
        except ValueError:
            stype = SchemaType.NONE
        return cls(schema.name, schema.schema_data, stype, {kv.key: kv.value for kv in schema.properties})


def fill_message_id(data: Any, message_id: MessageId | tuple[int, int]) -> Any:
    if isinstance(message_id, tuple):
        message_id = MessageId(message_id[0], message_id[1])
    return message_id.fill_pb(data)


def fill_key_values(repeated: Any, values: dict[str, Any] | None) -> None:
    for key, value in (values or {}).items():
        kv = repeated.add()
        kv.key = key
        kv.value = value


def fill_schema(target: Any, schema: WireSchema) -> None:
    target.name = schema.name
    target.schema_data = schema.schema_data
    target.type = int(schema.type)
    fill_key_values(target.properties, schema.properties)


def set_present(message: Any, **fields: Any) -> None:
    """Set each field whose value is not None; the others stay absent (proto2 optional)."""
    for name, value in fields.items():
        if value is not None:
            setattr(message, name, value)


def fill_feature_flags(command: Any, **flags: bool | None) -> None:
    """``command.feature_flags``: present iff some flag is not None, with those flags set."""
    if any(value is not None for value in flags.values()):
        command.feature_flags.SetInParent()
        set_present(command.feature_flags, **flags)
