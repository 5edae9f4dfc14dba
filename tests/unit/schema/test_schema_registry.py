"""SchemaRegistry: version reuse, lookups, errors, auto update, producer/consumer rules,
deletion markers and policy resolution."""

from __future__ import annotations

import json
import struct

import pytest

from magnetar.broker import errors as broker_errors
from magnetar.broker.config import BrokerConfig
from magnetar.broker.schema import (
    EffectiveSchemaPolicies,
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSchemaVersionError,
    SchemaInfo,
    SchemaNotFoundError,
    SchemaRegistry,
    SchemaRegistryConfig,
    SchemaType,
    SchemaVersionNotFoundError,
    resolve_policies,
    types,
)
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S
from magnetar.broker.schema.policies import parse_strategy
from magnetar.metadata.memory import MemoryMetadataServer

ps = pytest.importorskip("pulsar.schema")

T = "persistent://public/default/reg"


def user(**fields: object) -> type:
    return type("User", (ps.Record,), dict(fields))


@pytest.fixture
def v1(avro):  # type: ignore[no-untyped-def]
    return avro(user(a=ps.String()))


@pytest.fixture
def v2(avro):  # type: ignore[no-untyped-def]
    return avro(user(a=ps.String(), b=ps.Integer(required_default=True)))


@pytest.fixture
def v_bad(avro):  # type: ignore[no-untyped-def]
    return avro(user(a=ps.Integer(required=True)))


def pol(strategy: S = S.FULL, auto: bool = True, enforced: bool = False) -> EffectiveSchemaPolicies:
    return EffectiveSchemaPolicies(strategy, auto, enforced)


async def test_identical_schema_reuses_its_version(registry: SchemaRegistry, v1, v2) -> None:  # type: ignore[no-untyped-def]
    assert await registry.put_schema_if_compatible(T, v1, S.FULL) == bytes(8)
    assert await registry.put_schema_if_compatible(T, v2, S.FULL) == bytes(7) + b"\x01"
    # v1 again (an old producer reconnecting): its existing version, nothing new stored.
    renamed = SchemaInfo("other-name", v1.type, v1.schema_data, {"p": "1"})
    assert await registry.put_schema_if_compatible(T, renamed, S.ALWAYS_INCOMPATIBLE) == bytes(8)
    assert [r.version for r in await registry.get_all(T)] == [0, 1]
    assert await registry.find_version(T, v2) == 1
    assert await registry.find_version(T, SchemaInfo("x", SchemaType.JSON, v2.schema_data)) is None


async def test_get_schema_by_version(registry: SchemaRegistry, v1, v2) -> None:  # type: ignore[no-untyped-def]
    await registry.put_schema_if_compatible(T, v1, S.FULL)
    await registry.put_schema_if_compatible(T, v2, S.FULL)
    assert (await registry.get_schema(T)).version == 1
    assert (await registry.get_schema(T, None)).info == v2
    assert (await registry.get_schema(T, bytes(8))).info == v1
    assert (await registry.get_schema(T, b"")).version == 1
    assert (await registry.get_schema(T, struct.pack(">q", -1))).version == 1
    assert (await registry.get_schema(T, 0)).version_bytes == bytes(8)
    with pytest.raises(SchemaVersionNotFoundError, match="Schema version 7 not found") as exc:
        await registry.get_schema(T, struct.pack(">q", 7))
    assert exc.value.server_error == broker_errors.Code.TopicNotFound and exc.value.http_status == 404
    with pytest.raises(InvalidSchemaVersionError):
        await registry.get_schema(T, b"\x01\x02\x03")
    with pytest.raises(SchemaNotFoundError, match="Schema not found"):
        await registry.get_schema("persistent://public/default/none")
    assert await registry.get_all("persistent://public/default/none") == []


@pytest.mark.parametrize(
    ("stype", "data", "match"),
    [
        (SchemaType.AVRO, b'{"type": "record", "name": "R", "fields": [', "not valid JSON"),
        (
            SchemaType.JSON,
            b'{"type":"record","name":"R","fields":[{"name":"a","type":"uuid4"}]}',
            "UnknownType",
        ),
        (SchemaType.AVRO, b'{"type":"recrd","name":"R","fields":[]}', "Invalid schema definition"),
        (SchemaType.INT32, b"not empty", "length of schema data"),
        (SchemaType.AUTO_PUBLISH, b"", "cannot be stored"),
    ],
)
async def test_malformed_schema_is_refused_and_nothing_changes(  # type: ignore[no-untyped-def]
    server: MemoryMetadataServer, registry: SchemaRegistry, v1, stype, data, match
) -> None:
    await registry.put_schema_if_compatible(T, v1, S.ALWAYS_COMPATIBLE)
    before = {p: (await server.session().get(p)).value for p in server.paths()}
    with pytest.raises(InvalidSchemaError, match=match) as exc:
        await registry.put_schema_if_compatible(T, SchemaInfo("x", stype, data), S.ALWAYS_COMPATIBLE)
    assert exc.value.http_status == 422 and exc.value.server_error == broker_errors.Code.IncompatibleSchema
    with pytest.raises(InvalidSchemaError):
        await registry.check_compatibility(T, SchemaInfo("x", stype, data), S.FULL)
    after = {p: (await server.session().get(p)).value for p in server.paths()}
    assert after == before


async def test_unknown_type_name_from_rest() -> None:
    with pytest.raises(InvalidSchemaError, match="Unknown schema type 'AVRO2'"):
        types.schema_info_from_post_payload({"type": "AVRO2", "schema": "{}"}, name="t")


async def test_auto_update_disabled(registry: SchemaRegistry, v1, v2) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IncompatibleSchemaError, match="schema auto updating is disabled"):
        await registry.put_schema_if_compatible(T, v1, S.FULL, allow_auto_update=False)
    await registry.put_schema_if_compatible(T, v1, S.FULL)  # e.g. uploaded by an admin
    assert await registry.put_schema_if_compatible(T, v1, S.FULL, allow_auto_update=False) == bytes(8)
    with pytest.raises(IncompatibleSchemaError, match="schema auto updating is disabled"):
        await registry.put_schema_if_compatible(T, v2, S.FULL, allow_auto_update=False)


async def test_producer_rules(registry: SchemaRegistry, v1, v_bad) -> None:  # type: ignore[no-untyped-def]
    # A schemaless producer (no schema field, or BYTES) on a topic without a schema.
    assert await registry.add_producer_schema(T, None, pol(enforced=True)) == b""
    assert await registry.add_producer_schema(T, v1, pol()) == bytes(8)
    # ... and on a topic with one: fine unless validation is enforced.
    assert await registry.add_producer_schema(T, None, pol()) == b""
    bytes_schema = SchemaInfo("BYTES", SchemaType.BYTES, b"")
    assert await registry.add_producer_schema(T, bytes_schema, pol()) == b""
    with pytest.raises(IncompatibleSchemaError, match="SchemaValidationEnforced"):
        await registry.add_producer_schema(T, None, pol(enforced=True))
    with pytest.raises(IncompatibleSchemaError, match="Incompatible schema"):
        await registry.add_producer_schema(T, v_bad, pol(S.BACKWARD))
    # A STRING producer on an AVRO topic (the client sends "null" as the definition).
    string = SchemaInfo("STRING", SchemaType.STRING, b"null")
    with pytest.raises(IncompatibleSchemaError, match="exists schema type AVRO, new schema type STRING"):
        await registry.add_producer_schema(T, string, pol())


async def test_consumer_rules(registry: SchemaRegistry, v1, v2, v_bad) -> None:  # type: ignore[no-untyped-def]
    auto = SchemaInfo("AUTO_CONSUME", SchemaType.AUTO_CONSUME, b"")
    # Schemaless and AUTO_CONSUME consumers never fail and never register.
    await registry.add_consumer_schema(T, None, pol(), topic_idle=True)
    await registry.add_consumer_schema(T, auto, pol(), topic_idle=False)
    assert not await registry.has_schema(T)
    # A busy topic without a schema: nothing to check against.
    with pytest.raises(IncompatibleSchemaError, match="Topic does not have schema to check"):
        await registry.add_consumer_schema(T, v1, pol(), topic_idle=False)
    # An idle topic without a schema takes the consumer's.
    await registry.add_consumer_schema(T, v1, pol(), topic_idle=True)
    assert (await registry.get_schema(T)).info == v1
    # A consumer whose schema can read the topic's data is accepted, and registers nothing.
    await registry.add_consumer_schema(T, v2, pol(S.FULL), topic_idle=False)
    assert len(await registry.get_all(T)) == 1
    assert await registry.is_compatible_for_consumer(T, auto, S.ALWAYS_INCOMPATIBLE) == (True, "")
    assert await registry.is_compatible_for_consumer(T, v1, S.ALWAYS_INCOMPATIBLE) == (True, "")
    ok, reason = await registry.is_compatible_for_consumer(T, v_bad, S.FORWARD)
    assert not ok and "cannot read" in reason
    with pytest.raises(IncompatibleSchemaError):
        await registry.add_consumer_schema(T, v_bad, pol(S.FULL), topic_idle=True)


async def test_delete_marker_starts_a_fresh_history(registry: SchemaRegistry, v1, v2) -> None:  # type: ignore[no-untyped-def]
    await registry.put_schema_if_compatible(T, v1, S.FULL)
    await registry.put_schema_if_compatible(T, v2, S.FULL)
    assert await registry.delete_schema(T) == 2
    with pytest.raises(SchemaNotFoundError, match="deleted"):
        await registry.get_schema(T)
    with pytest.raises(SchemaNotFoundError):
        await registry.get_schema(T, 2)
    assert (await registry.get_schema(T, 1)).info == v2  # old versions stay readable
    assert await registry.get_all(T) == [] and not await registry.has_schema(T)
    with pytest.raises(SchemaNotFoundError):
        await registry.delete_schema(T)
    # After the marker any schema is welcome, and versions keep counting.
    string = SchemaInfo("STRING", SchemaType.STRING, b"null")
    assert await registry.put_schema_if_compatible(T, string, S.ALWAYS_INCOMPATIBLE) == bytes(7) + b"\x03"
    # v1 is not "identical to an existing version" any more: it is judged (and refused).
    with pytest.raises(IncompatibleSchemaError, match="exists schema type STRING"):
        await registry.put_schema_if_compatible(T, v1, S.FULL)
    assert await registry.delete_schema(T, force=True) == 3
    assert await registry.delete_schema(T, force=True) is None


async def test_key_value_schemas_with_different_part_types_are_different_versions(
    registry: SchemaRegistry,
) -> None:
    value = SchemaInfo("v", SchemaType.STRING, b"")
    kv_s = types.make_key_value_schema_info("kv", SchemaInfo("k", SchemaType.STRING, b""), value)
    kv_i = types.make_key_value_schema_info("kv", SchemaInfo("k", SchemaType.INT64, b""), value)
    assert kv_s.schema_data == kv_i.schema_data
    assert await registry.put_schema_if_compatible(T, kv_s, S.FULL) == bytes(8)
    with pytest.raises(IncompatibleSchemaError, match="KeyValue key schema"):
        await registry.put_schema_if_compatible(T, kv_i, S.FULL)
    assert await registry.put_schema_if_compatible(T, kv_i, S.ALWAYS_COMPATIBLE) == bytes(7) + b"\x01"
    rest = types.get_schema_response(await registry.get_schema(T))
    assert rest["type"] == "KEY_VALUE" and json.loads(rest["data"]) == {"key": "", "value": ""}
    assert rest["properties"]["key.schema.type"] == "INT64"


# ------------------------------------------------------------------ policies


def test_strategy_parsing() -> None:
    assert parse_strategy("backward_transitive") is S.BACKWARD_TRANSITIVE
    assert parse_strategy(None) is S.UNDEFINED and parse_strategy("") is S.UNDEFINED
    assert parse_strategy("NONE") is S.ALWAYS_COMPATIBLE
    assert S.FULL_TRANSITIVE.base is S.FULL and S.FULL_TRANSITIVE.is_transitive and not S.FULL.is_transitive
    with pytest.raises(InvalidSchemaError, match="Unknown schema compatibility strategy 'SIDEWAYS'"):
        parse_strategy("SIDEWAYS")
    # one enumeration: the REST bodies' and the CLI's is the registry's
    from magnetar.common import rest_enums, rest_models

    assert S is rest_enums.SchemaCompatibilityStrategy is rest_models.SchemaCompatibilityStrategy


def test_policy_resolution_order() -> None:
    cfg = SchemaRegistryConfig()
    assert resolve_policies(cfg) == EffectiveSchemaPolicies(S.FULL, True, False)
    ns = {"schema_compatibility_strategy": "FORWARD", "is_allow_auto_update_schema": False}
    assert resolve_policies(cfg, ns) == EffectiveSchemaPolicies(S.FORWARD, False, False)
    topic = {"schemaCompatibilityStrategy": "BACKWARD", "schemaValidationEnforced": True}
    assert resolve_policies(cfg, ns, topic) == EffectiveSchemaPolicies(S.BACKWARD, False, True)
    # UNDEFINED falls through; the deprecated auto-update policy comes before the broker default.
    ns_old = {
        "schema_compatibility_strategy": "UNDEFINED",
        "schema_auto_update_compatibility_strategy": "AutoUpdateDisabled",
    }
    assert resolve_policies(cfg, ns_old).strategy is S.ALWAYS_INCOMPATIBLE
    ns_undef = {
        "schema_compatibility_strategy": "UNDEFINED",
        "schema_auto_update_compatibility_strategy": None,
    }
    assert (
        resolve_policies(SchemaRegistryConfig(schema_compatibility_strategy=S.BACKWARD), ns_undef).strategy
        is S.BACKWARD
    )
    assert resolve_policies(cfg, ns, {"schemaCompatibilityStrategy": "UNDEFINED"}).strategy is S.FORWARD
    # The broker's isSchemaValidationEnforced wins over policies that do not enforce.
    strict = SchemaRegistryConfig(is_schema_validation_enforced=True)
    assert resolve_policies(strict, {"schema_validation_enforced": False}).validation_enforced
    assert resolve_policies(cfg, {"schema_validation_enforced": True}).validation_enforced
    assert not resolve_policies(
        cfg, {"schema_validation_enforced": True}, {"schemaValidationEnforced": False}
    ).validation_enforced
    # System topics use systemTopicSchemaCompatibilityStrategy.
    assert resolve_policies(cfg, ns, topic, is_system_topic=True).strategy is S.ALWAYS_COMPATIBLE


def test_config_from_broker_properties() -> None:
    assert SchemaRegistryConfig.from_properties(BrokerConfig().as_properties()) == SchemaRegistryConfig()
    cfg = SchemaRegistryConfig.from_properties(
        {
            "schemaCompatibilityStrategy": "BACKWARD_TRANSITIVE",
            "isAllowAutoUpdateSchemaEnabled": "false",
            "isSchemaValidationEnforced": "true",
            "systemTopicSchemaCompatibilityStrategy": "",
        }
    )
    assert cfg.schema_compatibility_strategy is S.BACKWARD_TRANSITIVE
    assert cfg.system_topic_schema_compatibility_strategy is S.ALWAYS_COMPATIBLE
    assert not cfg.is_allow_auto_update_schema_enabled and cfg.is_schema_validation_enforced
    assert (
        SchemaRegistryConfig.from_properties(
            {"schemaCompatibilityStrategy": "UNDEFINED"}
        ).schema_compatibility_strategy
        is S.FULL
    )
