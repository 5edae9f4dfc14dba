"""Avro and JSON evolution under every strategy, with definitions from the official client.

Each case registers ``old`` and then offers ``new`` under a strategy; the expectation is what
Avro schema resolution (and so Pulsar) decides.  A cross-check writes a record with the
writer schema and reads it with the reader schema through fastavro wherever the checker says
the pair is readable.
"""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from magnetar.broker.schema import IncompatibleSchemaError, SchemaRegistry, SchemaType
from magnetar.broker.schema.compatibility import SchemaCompatibilityChecker
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S

ps = pytest.importorskip("pulsar.schema")


def user(**fields: object) -> type:
    """A client Record class named ``User`` with the given fields."""
    return type("User", (ps.Record,), dict(fields))


V_A = dict(a=ps.String())
V_A_B_DEFAULT = dict(a=ps.String(), b=ps.Integer(required_default=True))  # b: ["null","int"], default null
V_A_B_NODEFAULT = dict(a=ps.String(), b=ps.Integer())  # b: ["null","int"], no default
V_A_N_INT = dict(a=ps.String(), n=ps.Integer(required=True))  # n: "int"
V_A_N_LONG = dict(a=ps.String(), n=ps.Long(required=True))  # n: "long"
V_A_N_STRING = dict(a=ps.String(), n=ps.String(required=True))  # n: "string"

# (name, old fields, new fields, {strategy: accepted})
EVOLUTIONS = [
    ("add field with default", V_A, V_A_B_DEFAULT, {S.BACKWARD: True, S.FORWARD: True, S.FULL: True}),
    ("add field without default", V_A, V_A_B_NODEFAULT, {S.BACKWARD: False, S.FORWARD: True, S.FULL: False}),
    (
        "remove field without default",
        V_A_B_NODEFAULT,
        V_A,
        {S.BACKWARD: True, S.FORWARD: False, S.FULL: False},
    ),
    ("remove field with default", V_A_B_DEFAULT, V_A, {S.BACKWARD: True, S.FORWARD: True, S.FULL: True}),
    ("int promoted to long", V_A_N_INT, V_A_N_LONG, {S.BACKWARD: True, S.FORWARD: False, S.FULL: False}),
    ("long narrowed to int", V_A_N_LONG, V_A_N_INT, {S.BACKWARD: False, S.FORWARD: True, S.FULL: False}),
    ("int changed to string", V_A_N_INT, V_A_N_STRING, {S.BACKWARD: False, S.FORWARD: False, S.FULL: False}),
]

CASES = [
    pytest.param(kind, old, new, strategy, accepted, id=f"{kind}-{name}-{strategy.value}")
    for name, old, new, verdicts in EVOLUTIONS
    for strategy, accepted in verdicts.items()
    for kind in ("AVRO", "JSON")
]


@pytest.fixture
def make(avro, json_schema):  # type: ignore[no-untyped-def]
    def _make(kind: str, fields: dict):  # type: ignore[no-untyped-def]
        return (avro if kind == "AVRO" else json_schema)(user(**fields))

    return _make


@pytest.mark.parametrize(("kind", "old", "new", "strategy", "accepted"), CASES)
async def test_evolution(registry: SchemaRegistry, make, kind, old, new, strategy, accepted) -> None:  # type: ignore[no-untyped-def]
    topic = "persistent://public/default/evo"
    v0 = await registry.put_schema_if_compatible(topic, make(kind, old), strategy)
    assert v0 == b"\x00" * 8
    ok, reason = await registry.check_compatibility(topic, make(kind, new), strategy)
    assert ok is accepted, reason
    if accepted:
        assert reason == ""
        v1 = await registry.put_schema_if_compatible(topic, make(kind, new), strategy)
        assert v1 == b"\x00" * 7 + b"\x01"
    else:
        assert "Incompatible schema" in reason
        with pytest.raises(IncompatibleSchemaError) as exc:
            await registry.put_schema_if_compatible(topic, make(kind, new), strategy)
        assert exc.value.message == reason
        assert [r.version for r in await registry.get_all(topic)] == [0], "nothing stored"


@pytest.mark.parametrize("kind", ["AVRO", "JSON"])
async def test_always_strategies(registry: SchemaRegistry, make, kind) -> None:  # type: ignore[no-untyped-def]
    t = "always"
    await registry.put_schema_if_compatible(t, make(kind, V_A_N_INT), S.ALWAYS_INCOMPATIBLE)
    # The identical schema is reused even when every change is refused.
    assert (
        await registry.put_schema_if_compatible(t, make(kind, V_A_N_INT), S.ALWAYS_INCOMPATIBLE)
        == b"\x00" * 8
    )
    with pytest.raises(IncompatibleSchemaError, match="ALWAYS_INCOMPATIBLE"):
        await registry.put_schema_if_compatible(t, make(kind, V_A_B_DEFAULT), S.ALWAYS_INCOMPATIBLE)
    # ALWAYS_COMPATIBLE takes anything, even a field type change.
    v = await registry.put_schema_if_compatible(t, make(kind, V_A_N_STRING), S.ALWAYS_COMPATIBLE)
    assert v == b"\x00" * 7 + b"\x01"


async def test_type_change_is_incompatible_unless_always_compatible(registry: SchemaRegistry, make) -> None:  # type: ignore[no-untyped-def]
    await registry.put_schema_if_compatible("tc", make("AVRO", V_A), S.FULL)
    with pytest.raises(IncompatibleSchemaError, match="exists schema type AVRO, new schema type JSON"):
        await registry.put_schema_if_compatible("tc", make("JSON", V_A), S.BACKWARD)
    assert await registry.put_schema_if_compatible("tc", make("JSON", V_A), S.ALWAYS_COMPATIBLE)


# Three versions: the third is compatible with the second but not with the first.
TRANSITIVE = [
    (S.BACKWARD, V_A, V_A_B_DEFAULT, V_A_B_NODEFAULT),
    (S.FORWARD, V_A_B_NODEFAULT, V_A_B_DEFAULT, V_A),
    (S.FULL, V_A, V_A_B_DEFAULT, V_A_B_NODEFAULT),
]


@pytest.mark.parametrize(("strategy", "v1", "v2", "v3"), TRANSITIVE, ids=[t[0].value for t in TRANSITIVE])
@pytest.mark.parametrize("transitive", [False, True])
async def test_transitive_across_three_versions(registry, make, strategy, v1, v2, v3, transitive) -> None:  # type: ignore[no-untyped-def]
    s = S[strategy.value + "_TRANSITIVE"] if transitive else strategy
    t = f"tr-{s.value}"
    await registry.put_schema_if_compatible(t, make("AVRO", v1), s)
    await registry.put_schema_if_compatible(t, make("AVRO", v2), s)
    if transitive:
        with pytest.raises(IncompatibleSchemaError) as exc:
            await registry.put_schema_if_compatible(t, make("AVRO", v3), s)
        assert "Incompatible schema" in exc.value.message
        assert len(await registry.get_all(t)) == 2
    else:
        assert await registry.put_schema_if_compatible(t, make("AVRO", v3), s) == b"\x00" * 7 + b"\x02"


def _roundtrip(writer: dict, reader: dict, record: dict) -> dict:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(writer), record)
    buf.seek(0)
    return fastavro.schemaless_reader(buf, fastavro.parse_schema(writer), fastavro.parse_schema(reader))


SAMPLE = {"a": "x", "b": 7, "n": 5}


@pytest.mark.parametrize(("name", "old", "new", "verdicts"), EVOLUTIONS, ids=[e[0] for e in EVOLUTIONS])
def test_checker_agrees_with_fastavro_resolution(avro, name, old, new, verdicts) -> None:  # type: ignore[no-untyped-def]
    """Where BACKWARD says yes, fastavro reads old data with the new schema (and vice versa)."""
    checker = SchemaCompatibilityChecker()
    o, n = avro(user(**old)), avro(user(**new))
    od, nd = json.loads(o.schema_data), json.loads(n.schema_data)
    rec = {k: v for k, v in SAMPLE.items() if k in old}
    if checker.check([o], n, S.BACKWARD)[0]:
        _roundtrip(od, nd, rec)
    else:
        with pytest.raises(Exception):  # noqa: B017 -- fastavro raises SchemaResolutionError or others
            _roundtrip(od, nd, rec)
    rec = {k: v for k, v in SAMPLE.items() if k in new}
    if checker.check([o], n, S.FORWARD)[0]:
        _roundtrip(nd, od, rec)
    else:
        with pytest.raises(Exception):  # noqa: B017
            _roundtrip(nd, od, rec)


def test_record_rename_with_the_same_fields_is_compatible(avro) -> None:  # type: ignore[no-untyped-def]
    """Avro resolves records field by field; the record's name does not take part (Pulsar
    accepts a renamed record class whose fields resolve)."""
    checker = SchemaCompatibilityChecker()
    a = avro(user(**V_A))
    b = avro(type("Person", (ps.Record,), dict(V_A)))
    for strategy in (S.BACKWARD, S.FORWARD, S.FULL):
        ok, reason = checker.check([a], b, strategy)
        assert ok, reason
    c = avro(type("Person", (ps.Record,), dict(V_A_N_INT)))  # n: "int", no default
    ok, reason = checker.check([a], c, S.FULL)
    assert not ok and "'n'" in reason
    assert a.type is SchemaType.AVRO
