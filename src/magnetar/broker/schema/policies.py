"""Compatibility strategies and where a topic's schema policies come from.

Theory of operation: three settings govern what a producer or consumer may do with a schema.

* the compatibility **strategy** (:class:`SchemaCompatibilityStrategy`, the one enumeration
  of ``common.rest_enums`` that the REST bodies and the CLI use too): the topic policy
  ``schemaCompatibilityStrategy`` if set and not UNDEFINED, else the namespace policy
  ``schema_compatibility_strategy``; if that is UNDEFINED the deprecated namespace policy
  ``schema_auto_update_compatibility_strategy`` (``AutoUpdateDisabled`` means
  ALWAYS_INCOMPATIBLE), else the broker's ``schemaCompatibilityStrategy`` (FULL; UNDEFINED
  there also means FULL).  System topics use ``systemTopicSchemaCompatibilityStrategy``
  (ALWAYS_COMPATIBLE) whatever the policies say -- Pulsar's order.
* **auto update** (may a producer register a new version?): the topic policy
  ``isAllowAutoUpdateSchema`` if set, else the namespace ``is_allow_auto_update_schema``
  if set, else the broker's ``isAllowAutoUpdateSchemaEnabled`` (true).
* **validation enforced** (must a producer on a topic with a schema carry one?): the broker's
  ``isSchemaValidationEnforced`` OR the topic policy ``schemaValidationEnforced`` if set, else
  the namespace ``schema_validation_enforced``.

Policy documents are passed in as the JSON mappings stored in the metadata store (namespace
``Policies`` with Pulsar's snake_case field names, ``TopicPolicies`` with camelCase ones), so
this module depends on nobody's typed wrapper.  ``NONE`` is accepted as an alias of
ALWAYS_COMPATIBLE (Confluent's word for "no checks"); anything else unknown is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.broker.schema.errors import InvalidSchemaError
from magnetar.common.rest_enums import SchemaCompatibilityStrategy


def parse_strategy(value: str | SchemaCompatibilityStrategy | None) -> SchemaCompatibilityStrategy:
    """A strategy from its name (see ``SchemaCompatibilityStrategy.lookup``); an unknown one is
    an :class:`InvalidSchemaError`."""
    strategy = SchemaCompatibilityStrategy.lookup(value)
    if strategy is None:
        raise InvalidSchemaError(f"Unknown schema compatibility strategy '{value}'")
    return strategy


# The deprecated SchemaAutoUpdateCompatibilityStrategy values (namespace policy).
_AUTO_UPDATE = {
    "AUTOUPDATEDISABLED": SchemaCompatibilityStrategy.ALWAYS_INCOMPATIBLE,
    "BACKWARD": SchemaCompatibilityStrategy.BACKWARD,
    "FORWARD": SchemaCompatibilityStrategy.FORWARD,
    "FULL": SchemaCompatibilityStrategy.FULL,
    "ALWAYSCOMPATIBLE": SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE,
    "BACKWARDTRANSITIVE": SchemaCompatibilityStrategy.BACKWARD_TRANSITIVE,
    "FORWARDTRANSITIVE": SchemaCompatibilityStrategy.FORWARD_TRANSITIVE,
    "FULLTRANSITIVE": SchemaCompatibilityStrategy.FULL_TRANSITIVE,
}


def from_auto_update_policy(value: str | None) -> SchemaCompatibilityStrategy:
    """Map the deprecated ``schema_auto_update_compatibility_strategy``; None is UNDEFINED."""
    if value is None:
        return SchemaCompatibilityStrategy.UNDEFINED
    return _AUTO_UPDATE.get(str(value).replace("_", "").upper(), SchemaCompatibilityStrategy.UNDEFINED)


# A schema definition (data + name + properties) above this is refused.  Versions live in the
# metadata store, whose values ZooKeeper caps near 1 MiB (jute.maxbuffer); real Avro/JSON/
# Protobuf definitions are a few KiB, so 256 KiB leaves room for base64 and the JSON wrapper.
SCHEMA_BYTES_MAX_DEFAULT = 256 * 1024
SCHEMA_BYTES_MAX_CEILING = 700 * 1024
# Bound on versions per topic, so the locator node stays far below the same 1 MiB cap.
SCHEMA_VERSIONS_MAX_DEFAULT = 4096


@dataclass(frozen=True, slots=True)
class SchemaRegistryConfig:
    """The broker settings the registry uses (Pulsar key names in :meth:`from_properties`)."""

    schema_compatibility_strategy: SchemaCompatibilityStrategy = SchemaCompatibilityStrategy.FULL
    system_topic_schema_compatibility_strategy: SchemaCompatibilityStrategy = (
        SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE
    )
    is_allow_auto_update_schema_enabled: bool = True
    is_schema_validation_enforced: bool = False
    schema_bytes_max: int = SCHEMA_BYTES_MAX_DEFAULT
    schema_versions_max: int = SCHEMA_VERSIONS_MAX_DEFAULT
    cas_retries_max: int = 16

    def __post_init__(self) -> None:
        if not 0 < self.schema_bytes_max <= SCHEMA_BYTES_MAX_CEILING:
            raise ValueError(f"schema_bytes_max must be in 1..{SCHEMA_BYTES_MAX_CEILING}")
        if self.schema_versions_max < 1 or self.cas_retries_max < 1:
            raise ValueError("schema_versions_max and cas_retries_max must be positive")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> SchemaRegistryConfig:
        """From Pulsar ``broker.conf`` keys (e.g. ``BrokerConfig.as_properties()``); others ignored."""

        def flag(key: str, default: bool) -> bool:
            v = props.get(key)
            if v is None or v == "":
                return default
            if isinstance(v, bool):
                return v
            return str(v).strip().lower() == "true"

        def strategy(key: str, default: SchemaCompatibilityStrategy) -> SchemaCompatibilityStrategy:
            s = parse_strategy(props.get(key))
            return default if s is SchemaCompatibilityStrategy.UNDEFINED else s

        return cls(
            schema_compatibility_strategy=strategy(
                "schemaCompatibilityStrategy", SchemaCompatibilityStrategy.FULL
            ),
            system_topic_schema_compatibility_strategy=strategy(
                "systemTopicSchemaCompatibilityStrategy", SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE
            ),
            is_allow_auto_update_schema_enabled=flag("isAllowAutoUpdateSchemaEnabled", True),
            is_schema_validation_enforced=flag("isSchemaValidationEnforced", False),
        )


# The broker.conf keys SchemaRegistryConfig.from_properties reads.
KNOWN_KEYS = frozenset(
    {
        "schemaCompatibilityStrategy",
        "systemTopicSchemaCompatibilityStrategy",
        "isAllowAutoUpdateSchemaEnabled",
        "isSchemaValidationEnforced",
    }
)


@dataclass(frozen=True, slots=True)
class EffectiveSchemaPolicies:
    strategy: SchemaCompatibilityStrategy
    allow_auto_update: bool
    validation_enforced: bool


def resolve_policies(
    config: SchemaRegistryConfig,
    namespace_policies: Mapping[str, Any] | None = None,
    topic_policies: Mapping[str, Any] | None = None,
    *,
    is_system_topic: bool = False,
) -> EffectiveSchemaPolicies:
    """Combine topic policy > namespace policy > broker config (see the module comment)."""
    ns = namespace_policies or {}
    tp = topic_policies or {}
    undefined = SchemaCompatibilityStrategy.UNDEFINED
    if is_system_topic:
        strategy = config.system_topic_schema_compatibility_strategy
    else:
        strategy = parse_strategy(tp.get("schemaCompatibilityStrategy"))
        if strategy is undefined:
            strategy = parse_strategy(ns.get("schema_compatibility_strategy"))
        if strategy is undefined:
            strategy = from_auto_update_policy(ns.get("schema_auto_update_compatibility_strategy"))
        if strategy is undefined:
            strategy = config.schema_compatibility_strategy
        if strategy is undefined:
            strategy = SchemaCompatibilityStrategy.FULL

    allow = tp.get("isAllowAutoUpdateSchema")
    if allow is None:
        allow = ns.get("is_allow_auto_update_schema")
    if allow is None:
        allow = config.is_allow_auto_update_schema_enabled

    enforced = tp.get("schemaValidationEnforced")
    if enforced is None:
        enforced = ns.get("schema_validation_enforced", False)
    return EffectiveSchemaPolicies(
        strategy=strategy,
        allow_auto_update=bool(allow),
        validation_enforced=bool(config.is_schema_validation_enforced or enforced),
    )
