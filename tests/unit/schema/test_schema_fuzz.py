"""Bad input never escapes as anything but InvalidSchemaError (Hypothesis)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetar.broker.schema import InvalidSchemaError, SchemaInfo, SchemaType, types
from magnetar.broker.schema.compatibility import SchemaCompatibilityChecker
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S

STORABLE = [t for t in SchemaType if t.value >= 0]
FIELD_TYPES = st.sampled_from(
    ["int", "long", "string", "bytes", "double", "float", "boolean", "null", "Other"]
)

# Avro-ish JSON: mostly records with random fields/defaults/unions, sometimes nonsense.
avro_type = st.recursive(
    FIELD_TYPES | st.lists(FIELD_TYPES, min_size=1, max_size=3),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"type": st.just("array"), "items": inner}),
        st.fixed_dictionaries({"type": st.just("map"), "values": inner}),
        st.fixed_dictionaries(
            {
                "type": st.just("enum"),
                "name": st.sampled_from(["E", "F"]),
                "symbols": st.lists(st.sampled_from("ABC"), max_size=3),
            }
        ),
    ),
    max_leaves=6,
)
field = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "c", "d"]), "type": avro_type},
    optional={
        "default": st.none() | st.integers(-3, 3) | st.text(max_size=2),
        "aliases": st.lists(st.sampled_from("abc"), max_size=2),
    },
)
record = st.fixed_dictionaries(
    {"type": st.just("record"), "name": st.sampled_from(["R", "S"]), "fields": st.lists(field, max_size=4)}
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stype=st.sampled_from(STORABLE),
    data=st.binary(max_size=64),
    props=st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=3),
)
def test_random_definitions_only_raise_invalid_schema(stype: SchemaType, data: bytes, props: dict) -> None:
    checker = SchemaCompatibilityChecker()
    try:
        checker.validate(SchemaInfo("x", stype, data, props))
    except InvalidSchemaError as e:
        assert e.message


@settings(max_examples=300, deadline=None)
@given(old=record, new=record, strategy=st.sampled_from(list(S)))
def test_random_avro_pairs_get_a_verdict_or_invalid_schema(old: dict, new: dict, strategy: S) -> None:
    checker = SchemaCompatibilityChecker()
    o = SchemaInfo("o", SchemaType.AVRO, json.dumps(old).encode())
    n = SchemaInfo("n", SchemaType.AVRO, json.dumps(new).encode())
    try:
        checker.validate(o)
        ok, reason = checker.check([o], n, strategy)
    except InvalidSchemaError:
        return
    assert isinstance(ok, bool) and (ok or reason)
    if old == new and strategy is not S.ALWAYS_INCOMPATIBLE:
        assert ok, reason  # same schema (maybe other key order): readable both ways
    if strategy is S.ALWAYS_COMPATIBLE:
        assert ok


@settings(max_examples=200, deadline=None)
@given(
    payload=st.dictionaries(
        st.sampled_from(["type", "schema", "properties"]),
        st.none()
        | st.text(max_size=20)
        | st.integers()
        | st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    )
)
def test_random_rest_payloads(payload: dict) -> None:
    try:
        info = types.schema_info_from_post_payload(payload, name="t")
        SchemaCompatibilityChecker().validate(info)
    except InvalidSchemaError as e:
        assert e.message
