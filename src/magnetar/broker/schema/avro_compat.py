"""Avro schema resolution: can a reader schema read data written with a writer schema?

Theory of operation: Avro decides compatibility by *schema resolution* (the Avro spec,
"Schema Resolution"): data written with the writer's schema is decoded with the reader's.
Pulsar's Avro/JSON checkers ask exactly that question of Avro's ``SchemaValidatorBuilder``
(BACKWARD = the new schema can read the old, FORWARD = the old can read the new, FULL = both).
This module answers it on schemas parsed and normalised by ``fastavro.parse_schema`` (which
validates names, types and defaults; fastavro itself resolves at read time but has no
"can read" query).  The rules, as Avro's ``SchemaCompatibility`` applies them:

* same primitive type: yes; promotions: int -> long/float/double, long -> float/double,
  float -> double, string <-> bytes.  Logical types are ignored (the underlying type counts).
* writer union: every writer branch must be readable by the reader.  Reader union with a
  non-union writer: some reader branch must read the writer.
* record: same unqualified name (or the reader lists the writer's name as an alias); every
  reader field must exist in the writer (by name or reader alias) with a readable type, or
  have a default.  Writer fields the reader lacks are skipped.
* enum: same name; every writer symbol must be a reader symbol unless the reader has a default.
* fixed: same name and size.  array: items readable.  map: values readable.

Recursive types terminate: a (reader, writer) pair already being checked is assumed
compatible, as Avro does.  The answer is ``None`` (compatible) or the first reason found,
with a path such as ``R.address.zip``.
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
            for branch in w:
                reason = self.check(r, branch, path, depth + 1)
                if reason is not None:
                    return f"{reason} (writer union branch {describe(self.resolve(branch, 1))})"
            return None
        if rk == "union":
            for branch in r:
                if self.check(branch, w, path, depth + 1) is None:
                    return None
            return f"{path}: reader union {describe(r)} has no branch that reads writer type {describe(w)}"
        if rk == wk:
            if rk in PRIMITIVES:
                return None
            return getattr(self, f"_{rk}")(r, w, path, depth)
        if (wk, rk) in _PROMOTIONS:
            return None
        return f"{path}: reader type {describe(r)} cannot read writer type {describe(w)}"

    def _record(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        if not names_match(r, w):
            return f"{path}: record name mismatch: reader {r.get('name')}, writer {w.get('name')}"
        writer_fields = {f["name"]: f for f in w.get("fields", [])}
        for rf in r.get("fields", []):
            wf = writer_fields.get(rf["name"])
            if wf is None:
                for alias in rf.get("aliases", ()):
                    wf = writer_fields.get(alias)
                    if wf is not None:
                        break
            fpath = f"{path}.{rf['name']}"
            if wf is None:
                if "default" not in rf:
                    return (
                        f"{fpath}: field '{rf['name']}' is missing from the writer schema "
                        "and has no default value in the reader schema"
                    )
                continue
            reason = self.check(rf["type"], wf["type"], fpath, depth + 1)
            if reason is not None:
                return reason
        return None

    def _enum(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        if not names_match(r, w):
            return f"{path}: enum name mismatch: reader {r.get('name')}, writer {w.get('name')}"
        reader_symbols = set(r.get("symbols", []))
        missing = [s for s in w.get("symbols", []) if s not in reader_symbols]
        if missing and "default" not in r:
            return f"{path}: enum {short_name(r.get('name'))} lacks writer symbols {missing}"
        return None

    def _fixed(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        if not names_match(r, w):
            return f"{path}: fixed name mismatch: reader {r.get('name')}, writer {w.get('name')}"
        if r.get("size") != w.get("size"):
            return f"{path}: fixed size mismatch: reader {r.get('size')}, writer {w.get('size')}"
        return None

    def _array(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        return self.check(r["items"], w["items"], f"{path}[]", depth + 1)

    def _map(self, r: dict, w: dict, path: str, depth: int) -> str | None:
        return self.check(r["values"], w["values"], f"{path}{{}}", depth + 1)


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


def names_match(reader: dict, writer: dict) -> bool:
    rn, wn = reader.get("name", ""), writer.get("name", "")
    if short_name(rn) == short_name(wn):
        return True
    aliases = reader.get("aliases", ())
    return wn in aliases or short_name(wn) in {short_name(a) for a in aliases}


def can_read(
    reader: Any, reader_named: dict[str, Any], writer: Any, writer_named: dict[str, Any]
) -> str | None:
    """None if data written with ``writer`` decodes with ``reader``; else the reason."""
    root = short_name(reader.get("name", "")) if isinstance(reader, dict) else kind(reader)
    return _Resolver(reader_named, writer_named).check(reader, writer, root or "schema")
