"""Avro compatibility as Avro's resolving grammar (and so Pulsar) decides it: schema pairs.

``reads(reader, writer)`` is None when data written with ``writer`` resolves with ``reader``.
The expectations follow Avro's ``Resolver``/``ResolvingGrammarGenerator`` as Pulsar's
``SchemaValidatorBuilder`` uses them: records resolve field by field whatever their names;
enum and fixed keep their names; union branches are chosen by full name (or, for records,
by structure); aliases rename the writer's types and fields first.
"""

from __future__ import annotations

import json

import pytest

from magnetar.broker.schema.avro_compat import can_read
from magnetar.broker.schema.definitions import parse_avro


def reads(reader: object, writer: object) -> str | None:
    r = parse_avro(json.dumps(reader).encode())
    w = parse_avro(json.dumps(writer).encode())
    return can_read(r.schema, r.named, w.schema, w.named)


def rec(name: str, *fields: dict, **extra: object) -> dict:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, type_: object, **extra: object) -> dict:
    return {"name": name, "type": type_, **extra}


def enum(name: str, *symbols: str, **extra: object) -> dict:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


USER = rec("User", f("name", "string"), f("age", "int"))
PERSON = rec("Person", f("name", "string"), f("age", "long"))


def test_renamed_record_with_resolving_fields_is_compatible() -> None:
    assert reads(PERSON, USER) is None  # int -> long, names differ: fields decide
    assert reads(USER, PERSON) is not None  # long cannot be read as int
    assert reads(rec("Person", f("name", "string"), f("age", "int")), USER) is None
    assert reads(rec("Other", f("name", "string"), namespace="x.y"), USER) is None  # age skipped


def test_renamed_record_missing_a_field_without_default() -> None:
    reason = reads(rec("Person", f("name", "string"), f("email", "string")), USER)
    assert reason is not None and "email" in reason and "no default" in reason
    assert reads(rec("Person", f("name", "string"), f("email", "string", default="")), USER) is None


def test_nested_renamed_record() -> None:
    w = rec("Outer", f("inner", rec("A", f("x", "int"))))
    r = rec("Outer2", f("inner", rec("B", f("x", "long"))))
    assert reads(r, w) is None


def test_enum_names_are_checked_symbols_are_not() -> None:
    assert reads(enum("E", "A", "B", "C"), enum("E", "A", "B")) is None
    # a writer symbol the reader lacks fails only when read: Avro's grammar has no error
    assert reads(enum("E", "A", "B"), enum("E", "A", "B", "C")) is None
    reason = reads(enum("F", "A", "B"), enum("E", "A", "B"))
    assert reason is not None and "enum name mismatch" in reason
    # outside a union the short name counts (Resolver compares getName())
    assert reads(enum("E", "A", namespace="n1"), enum("E", "A", namespace="n2")) is None
    assert reads(enum("F", "A", aliases=["E"]), enum("E", "A")) is None  # alias renames the writer


def test_fixed_names_and_sizes() -> None:
    fx = {"type": "fixed", "name": "F", "size": 4}
    assert reads(fx, fx) is None
    assert "fixed name mismatch" in (reads({**fx, "name": "G"}, fx) or "")
    assert "fixed size mismatch" in (reads({**fx, "size": 8}, fx) or "")
    assert reads({**fx, "name": "G", "aliases": ["F"]}, fx) is None


def test_union_branch_of_a_record_chosen_by_structure() -> None:
    # a writer record resolves into a reader union's record of another name when its fields do
    assert reads(["null", PERSON], USER) is None
    assert reads(["null", rec("Person", f("email", "string"))], USER) is not None
    # a writer union of records: every branch must find its reader branch
    assert reads(["null", PERSON], ["null", USER]) is None
    # exact full name wins over an earlier structural match
    r = ["null", rec("Z", f("name", "string")), rec("User", f("name", "string"), f("age", "long"))]
    assert reads(r, USER) is None


def test_union_branches_of_enum_and_fixed_need_the_full_name() -> None:
    assert reads(["null", enum("E", "A")], enum("E", "A")) is None
    reason = reads(["null", enum("F", "A")], enum("E", "A"))
    assert reason is not None and "has no branch" in reason
    # inside a union the full name counts: another namespace does not match
    assert reads(["null", enum("E", "A", namespace="n1")], enum("E", "A", namespace="n2")) is not None
    assert reads(["null", enum("F", "A", aliases=["E"])], enum("E", "A")) is None  # alias: same full name
    fx = {"type": "fixed", "name": "F", "size": 2}
    assert reads(["null", {**fx, "name": "G"}], fx) is not None


def test_field_aliases_apply_within_the_same_record_name() -> None:
    w = rec("A", f("x", "int"))
    # Avro keys field aliases by the reader record's full name: a renamed record without a
    # record alias does not get its fields renamed
    assert reads(rec("B", f("y", "int", aliases=["x"])), w) is not None
    assert reads(rec("B", f("y", "int", aliases=["x"]), aliases=["A"]), w) is None
    assert reads(rec("A", f("y", "int", aliases=["x"])), w) is None


def test_union_promotions_and_primitives() -> None:
    assert reads(["null", "double"], "int") is None
    assert reads(["null", "bytes"], "string") is None
    assert reads(["null", "boolean"], "int") is not None


@pytest.mark.parametrize(
    ("reader", "writer"),
    [
        (
            rec("Node", f("v", "long"), f("next", ["null", "Node"])),
            rec("Node", f("v", "int"), f("next", ["null", "Node"])),
        ),
        (
            rec("N2", f("v", "long"), f("next", ["null", "N2"])),
            rec("N1", f("v", "int"), f("next", ["null", "N1"])),
        ),
    ],
)
def test_recursive_records_terminate(reader: dict, writer: dict) -> None:
    assert reads(reader, writer) is None
