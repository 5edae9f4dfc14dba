"""Compatibility checks: may a new schema join a topic's history under a strategy?

Theory of operation: :class:`SchemaCompatibilityChecker` answers ``(ok, reason)`` for a new
schema against the existing live versions (oldest first), as Pulsar's registry does:

* ALWAYS_COMPATIBLE accepts anything (even a change of type); no history accepts anything.
* otherwise the latest version is checked -- or, for a ``_TRANSITIVE`` strategy, every live
  version -- with the base strategy (BACKWARD, FORWARD, FULL, ALWAYS_INCOMPATIBLE);
* against one existing version: a different type is incompatible ("exists schema type X, new
  schema type Y"); the identical definition is compatible; ALWAYS_INCOMPATIBLE refuses any
  other; then by type:

  - AVRO, JSON: Avro schema resolution (``avro_compat``).  BACKWARD: the new schema reads data
    written with the old; FORWARD: the old reads the new; FULL: both.
  - PROTOBUF: compatible (Pulsar registers no checker for it; its default one allows).
  - PROTOBUF_NATIVE: the root message type may not change (Pulsar's
    ``ProtobufNativeSchemaCompatibilityCheck``).
  - KEY_VALUE: key and value parts must keep their types, and each part is checked with the
    same strategy by its own type's rules.
  - primitives: same type is enough.

The checker validates definitions (``definitions.validate``) before judging them, so a broken
stored definition can never make a check pass by accident.  Consumers use
:meth:`check_for_consumer` (Pulsar's ``checkConsumerCompatibility``).
"""

from __future__ import annotations

from collections.abc import Sequence

from magnetar.broker.schema import avro_compat, definitions
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S
from magnetar.broker.schema.types import SchemaInfo, SchemaType, key_value_parts

Verdict = tuple[bool, str]
_OK: Verdict = (True, "")


class SchemaCompatibilityChecker:
    def __init__(self, parse_cache_entries_max: int = 256) -> None:
        self._cache = definitions.AvroParseCache(parse_cache_entries_max)

    def validate(self, info: SchemaInfo) -> None:
        definitions.validate(info, self._cache)

    def check(self, existing: Sequence[SchemaInfo], new: SchemaInfo, strategy: S) -> Verdict:
        """``existing`` oldest first (live versions only).  Raises InvalidSchemaError if ``new`` is malformed."""
        self.validate(new)
        if strategy is S.ALWAYS_COMPATIBLE or not existing:
            return _OK
        if strategy is S.UNDEFINED:
            strategy = S.FULL
        targets = list(existing) if strategy.is_transitive else [existing[-1]]
        base = strategy.base
        for old in reversed(targets):
            reason = self._check_pair(old, new, base)
            if reason:
                return False, reason
        return _OK

    def check_for_consumer(self, existing: Sequence[SchemaInfo], new: SchemaInfo, strategy: S) -> Verdict:
        """Pulsar's consumer rule: the consumer's schema must read what the topic holds.

        AUTO_CONSUME reads anything.  A topic without a schema has nothing to check against.
        A schema identical to a live version is accepted.  BACKWARD, FORWARD, FORWARD_TRANSITIVE
        and FULL check the latest version with BACKWARD; the other strategies are applied as
        for a producer (ALWAYS_INCOMPATIBLE refuses, the _TRANSITIVE ones check every version).
        """
        if new.type is SchemaType.AUTO_CONSUME:
            return _OK
        if not existing:
            return False, "Topic does not have schema to check"
        h = new.schema_hash()
        if any(old.schema_hash() == h for old in existing):
            return _OK
        if strategy in (S.BACKWARD, S.FORWARD, S.FORWARD_TRANSITIVE, S.FULL, S.UNDEFINED):
            return self.check(existing[-1:], new, S.BACKWARD)
        return self.check(existing, new, strategy)

    # ------------------------------------------------------------------ one pair

    def _check_pair(self, old: SchemaInfo, new: SchemaInfo, base: S) -> str:
        if old.type != new.type:
            return f"Incompatible schema: exists schema type {old.type.name}, new schema type {new.type.name}"
        if old.schema_hash() == new.schema_hash():
            return ""
        if base is S.ALWAYS_INCOMPATIBLE:
            return "Incompatible schema: the compatibility strategy ALWAYS_INCOMPATIBLE refuses any change"
        return self._check_same_type(old, new, base)

    def _check_same_type(self, old: SchemaInfo, new: SchemaInfo, base: S) -> str:
        t = new.type
        if t in (SchemaType.AVRO, SchemaType.JSON):
            return self._check_avro(old, new, base)
        if t is SchemaType.PROTOBUF_NATIVE:
            old_root = definitions.parse_protobuf_native(old.schema_data).root_message_type_name
            new_root = definitions.parse_protobuf_native(new.schema_data).root_message_type_name
            if old_root != new_root:
                return f"Incompatible schema: protobuf root message isn't allowed to change ({old_root} -> {new_root})"
            return ""
        if t is SchemaType.KEY_VALUE:
            return self._check_key_value(old, new, base)
        return ""  # PROTOBUF and primitives: same type is enough

    def _check_avro(self, old: SchemaInfo, new: SchemaInfo, base: S) -> str:
        o = self._cache.parse(old.schema_data)
        n = self._cache.parse(new.schema_data)
        if base in (S.BACKWARD, S.FULL):
            reason = avro_compat.can_read(n.schema, n.named, o.schema, o.named)
            if reason:
                return f"Incompatible schema ({base.value}): the new schema cannot read data written with the old: {reason}"
        if base in (S.FORWARD, S.FULL):
            reason = avro_compat.can_read(o.schema, o.named, n.schema, n.named)
            if reason:
                return f"Incompatible schema ({base.value}): the old schema cannot read data written with the new: {reason}"
        return ""

    def _check_key_value(self, old: SchemaInfo, new: SchemaInfo, base: S) -> str:
        old_parts, new_parts = key_value_parts(old), key_value_parts(new)
        for which, o, n in zip(("key", "value"), old_parts, new_parts, strict=True):
            if o.type != n.type:
                return (
                    f"Incompatible KeyValue {which} schema: exists type {o.type.name}, new type {n.type.name}"
                )
            reason = self._check_pair(o, n, base)
            if reason:
                return f"Incompatible KeyValue {which} schema: {reason}"
        return ""
