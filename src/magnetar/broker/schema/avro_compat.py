"""Avro schema resolution: can a reader schema read data written with a writer schema?

Theory of operation: Pulsar's Avro/JSON checkers ask Avro's ``SchemaValidatorBuilder``
(BACKWARD = the new schema can read the old, FORWARD = the old can read the new, FULL =
both), which builds Avro's *resolving grammar* (``Resolver`` + ``ResolvingGrammarGenerator``)
for the pair and refuses it when the grammar holds an error symbol.  This module answers
the same question with the same rules, on schemas parsed and normalised by
``fastavro.parse_schema`` (full names, named types resolved through ``named``):

* aliases first (``Schema.applyAliases``): a writer named type whose full name is an alias
  of a reader named type takes the reader's name; a writer record field named like an
  alias of a field of the reader record *of the same (aliased) name* takes that field's name.
* writer union: every writer branch must resolve (against the reader union branch by
  branch when the two unions are equivalent, otherwise against the whole reader).
* reader union, writer not: the first matching branch -- same primitive type; for named
  types the same full name, else (records only) the first branch whose fields resolve
  directly (one with the writer's short name preferred); else a numeric/string
  promotion -- and the writer must resolve against it.  No branch: incompatible.
* records: *no name check* -- records resolve field by field: every reader field must be
  in the writer (by name, after aliases) with a type that resolves, or have a default;
  writer fields the reader lacks are skipped.
* enum: same (short) name.  Symbols are not checked: a writer symbol the reader lacks (and
  no reader default) fails only when such a value is read, so Avro's grammar has no
  error for it and Pulsar accepts the pair.
* fixed: same (short) name and size.  array/map: items/values resolve.
* same primitive: yes; promotions int -> long/float/double, long -> float/double,
  float -> double, string <-> bytes.  Logical types are ignored (the underlying type counts).

Recursive types terminate: a (reader, writer) pair already being checked is assumed
compatible, as Avro's ``seen`` map does.  The answer is ``None`` (compatible) or the first
reason found, with a path such as ``R.address.zip``.
"""

from __future__ import annotations

from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = frozenset(
    {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    }
)
_DEPTH_MAX = 64  # nesting bound; deeper definitions are refused rather than recursed into


class _Resolver:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self._named = (reader_named, writer_named)
        self._in_progress: set[tuple[int, int]] = set()
        # Schema.applyAliases: reader aliases (full names) -> reader full name, and per reader
        # record full name, field alias -> field name.
        self._aliases: dict[str, str] = {}
        self._field_aliases: dict[str, dict[str, str]] = {}
        for full, schema in reader_named.items():
            if not isinstance(schema, dict):
                continue
            for alias in schema.get("aliases", ()):
                self._aliases[qualify(alias, full)] = full
            if schema.get("type") == "record":
                fa = {a: f["name"] for f in schema.get("fields", []) for a in f.get("aliases", ())}
                if fa:
                    self._field_aliases[full] = fa

    def resolve(self, schema: Any, side: int) -> Any:
        for _ in range(_DEPTH_MAX):
            if isinstance(schema, str) and schema not in PRIMITIVES:
                schema = self._named[side].get(schema, schema)
                if isinstance(schema, str):
                    return schema  # unknown name: reported by kind()
            elif isinstance(schema, dict) and not isinstance(schema.get("type"), str):
                schema = schema.get("type")  # {"type": {...}} wrapper
            else:
                return schema
        return schema

    def writer_name(self, w: dict) -> str:
        name = str(w.get("name", ""))
        return self._aliases.get(name, name)

    def writer_fields(self, w: dict) -> dict[str, dict]:
        renames = self._field_aliases.get(self.writer_name(w), {})
        return {renames.get(f["name"], f["name"]): f for f in w.get("fields", [])}

    def check(self, reader: Any, writer: Any, path: str, depth: int = 0) -> str | None:
        if depth > _DEPTH_MAX:
            return f"{path}: schema nested deeper than {_DEPTH_MAX} levels"
        r = self.resolve(reader, 0)
        w = self.resolve(writer, 1)
        key = (id(r), id(w))
        if key in self._in_progress:
            return None
        self._in_progress.add(key)
        try:
            return self._check(r, w, path, depth)
        finally:
            self._in_progress.discard(key)

    def _check(self, r: Any, w: Any, path: str, depth: int) -> str | None:
        rk, wk = kind(r), kind(w)
        if wk == "union":
            equivalent = rk == "union" and self.union_equiv(w, r, set())
            for i, branch in enumerate(w):
                reason = self.check(r[i] if equivalent else r, branch, path, depth + 1)
                if reason is not None:
                    return f"{reason} (writer union branch {describe(self.resolve(branch, 1))})"
            return None
        if rk == wk:
            if rk in PRIMITIVES:
                return None
            return getattr(self, f"_{rk}")(r, w, path, depth)
        if rk == "union":
            j = self.first_matching_branch(r, w, depth)
            if j < 0:
                return (
                    f"{path}: reader union {describe(r)} has no branch that reads writer type {describe(w)}"
                )
            return self.check(r[j], w, path, depth + 1)
        if (wk, rk) in _PROMOTIONS:
            return None
        return f"{path}: reader type {describe(r)} cannot read writer type {describe(w)}"

    def _record(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        missing = self._missing_required(r, w)
        if missing is not None:
            return (
                f"{path}.{missing}: field '{missing}' is missing from the writer schema "
                "and has no default value in the reader schema"
            )
        writer_fields = self.writer_fields(w)
        for rf in r.get("fields", []):
            wf = writer_fields.get(rf["name"])
            if wf is None:
                continue
            reason = self.check(rf["type"], wf["type"], f"{path}.{rf['name']}", depth + 1)
            if reason is not None:
                return reason
        return None

    def _missing_required(self, r: dict, w: dict) -> str | None:
        writer_fields = self.writer_fields(w)
        for rf in r.get("fields", []):
            if rf["name"] not in writer_fields and "default" not in rf:
                return str(rf["name"])
        return None

    def _enum(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        if short_name(self.writer_name(w)) != short_name(r.get("name")):
            return f"{path}: enum name mismatch: reader {r.get('name')}, writer {w.get('name')}"
        return None

    def _fixed(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        if short_name(self.writer_name(w)) != short_name(r.get("name")):
            return f"{path}: fixed name mismatch: reader {r.get('name')}, writer {w.get('name')}"
        if r.get("size") != w.get("size"):
            return f"{path}: fixed size mismatch: reader {r.get('size')}, writer {w.get('size')}"
        return None

    def _array(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        return self.check(r["items"], w["items"], f"{path}[]", depth + 1)

    def _map(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        return self.check(r["values"], w["values"], f"{path}{{}}", depth + 1)

    # ------------------------------------------------------------ unions
    def first_matching_branch(self, r: list, w: Any, depth: int) -> int:
        """Avro's ReaderUnion branch choice for a non-union writer; -1 when none matches."""
        wk = kind(w)
        structure = -1
        for j, raw in enumerate(r):
            b = self.resolve(raw, 0)
            if kind(b) != wk:
                continue
            if wk not in ("record", "enum", "fixed"):
                return j
            if self.writer_name(w) == b.get("name"):
                return j  # the same full name
            if wk == "record" and not self._direct_error(b, w, depth + 1):
                if structure < 0 or short_name(self.writer_name(w)) == short_name(b.get("name")):
                    structure = j
        if structure >= 0:
            return structure
        for j, raw in enumerate(r):
            if (wk, kind(self.resolve(raw, 0))) in _PROMOTIONS:
                return j
        return -1

    def _direct_error(self, r: Any, w: Any, depth: int) -> bool:
        """Would resolving this record pair fail at its own level or at one of its fields'
        (Avro's ``hasMatchError``: nested errors deeper down do not count)?"""
        if depth > _DEPTH_MAX:
            return True
        if self._missing_required(r, w) is not None:
            return True
        writer_fields = self.writer_fields(w)
        for rf in r.get("fields", []):
            wf = writer_fields.get(rf["name"])
            if wf is not None and self._shallow_error(rf["type"], wf["type"], depth + 1):
                return True
        return False

    def _shallow_error(self, reader: Any, writer: Any, depth: int) -> bool:
        r, w = self.resolve(reader, 0), self.resolve(writer, 1)
        rk, wk = kind(r), kind(w)
        if wk == "union":
            return False
        if rk == wk:
            if rk == "record":
                return self._missing_required(r, w) is not None
            if rk in ("enum", "fixed"):
                return getattr(self, f"_{rk}")(r, w, "", depth) is not None
            return False
        if rk == "union":
            return self.first_matching_branch(r, w, depth) < 0
        return (wk, rk) not in _PROMOTIONS

    def union_equiv(self, w: Any, r: Any, seen: set[tuple[int, int]]) -> bool:
        """Avro's ``unionEquiv``: structurally the same (short names for named types)."""
        w, r = self.resolve(w, 1), self.resolve(r, 0)
        wk = kind(w)
        if wk != kind(r):
            return False
        if wk in ("record", "enum", "fixed") and short_name(w.get("name")) != short_name(r.get("name")):
            return False
        if wk == "array":
            return self.union_equiv(w["items"], r["items"], seen)
        if wk == "map":
            return self.union_equiv(w["values"], r["values"], seen)
        if wk == "fixed":
            return w.get("size") == r.get("size")
        if wk == "enum":
            return list(w.get("symbols", [])) == list(r.get("symbols", []))
        if wk == "union":
            return len(w) == len(r) and all(self.union_equiv(a, b, seen) for a, b in zip(w, r, strict=True))
        if wk == "record":
            key = (id(w), id(r))
            if key in seen:
                return True
            seen.add(key)
            wf, rf = w.get("fields", []), r.get("fields", [])
            return len(wf) == len(rf) and all(
                a["name"] == b["name"] and self.union_equiv(a["type"], b["type"], seen)
                for a, b in zip(wf, rf, strict=True)
            )
        return wk in PRIMITIVES


def kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        t = schema.get("type")
        return t if isinstance(t, str) else "unknown"
    return "unknown"


def describe(schema: Any) -> str:
    k = kind(schema)
    if k == "union":
        return "[" + ", ".join(describe(b) if not isinstance(b, str) else b for b in schema) + "]"
    if isinstance(schema, dict) and "name" in schema:
        return f"{k} {short_name(schema['name'])}"
    return k


def short_name(name: Any) -> str:
    return str(name).rsplit(".", 1)[-1]


def qualify(name: str, full_name_of_owner: str) -> str:
    """An alias's full name: as written when dotted, else in its owner's namespace."""
    if "." in name:
        return name
    namespace = full_name_of_owner.rpartition(".")[0]
    return f"{namespace}.{name}" if namespace else name


def can_read(
    reader: Any, reader_named: dict[str, Any], writer: Any, writer_named: dict[str, Any]
) -> str | None:
    """None if data written with ``writer`` decodes with ``reader``; else the reason."""
    root = short_name(reader.get("name", "")) if isinstance(reader, dict) else kind(reader)
    return _Resolver(reader_named, writer_named).check(reader, writer, root or "schema")
