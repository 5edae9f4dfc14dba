"""No state hung on broker objects from outside their class (issue 14: one owner per fact).

Reads every module under ``src/magnetar/broker`` with ``ast`` and fails on:

* ``setattr(obj, ...)`` (and ``object.__setattr__``) on anything but ``self``/``cls``;
* ``obj.attr = value`` where ``obj`` is not ``self``/``cls`` and no class of the broker
  declares ``attr`` (as ``self.attr`` in a method, a class-level annotation, a
  ``__slots__`` entry or a property setter) -- i.e. an attribute that exists only
  because someone outside the owning class hung it there.

Assignments to declared attributes of another object (``producer.encrypted = ...``)
are allowed: the owner declared the field and its type.
"""

from __future__ import annotations

import ast
from pathlib import Path

BROKER = Path(__file__).resolve().parents[3] / "src" / "magnetar" / "broker"
OWN = {"self", "cls"}
# Fields of objects that are not the broker's (the library declares them), written by name.
EXTERNAL_FIELDS = {
    "verify_mode": "ssl.SSLContext",
    "check_hostname": "ssl.SSLContext",
    "minimum_version": "ssl.SSLContext",
    "maximum_version": "ssl.SSLContext",
    "num_messages_in_batch": "protocol MessageMetadata (protobuf)",
    "uncompressed_size": "protocol MessageMetadata (protobuf)",
}


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted(BROKER.rglob("*.py"))]


def _declared(trees: list[tuple[Path, ast.Module]]) -> set[str]:
    names: set[str] = set()
    for _, tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    names.add(stmt.target.id)
                if isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name) and t.id == "__slots__":
                            names.update(e.value for e in ast.walk(stmt.value) if isinstance(e, ast.Constant))
                        elif isinstance(t, ast.Name):
                            names.add(t.id)
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                    for deco in stmt.decorator_list:
                        if isinstance(deco, ast.Attribute) and deco.attr == "setter":
                            names.add(stmt.name)
            for node in ast.walk(cls):
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    targets = list(node.targets)
                elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                    targets = [node.target]
                for t in targets:
                    for el in ast.walk(t):
                        if (
                            isinstance(el, ast.Attribute)
                            and isinstance(el.value, ast.Name)
                            and el.value.id in OWN
                        ):
                            names.add(el.attr)
    return names | set(EXTERNAL_FIELDS)


def _foreign_writes(trees: list[tuple[Path, ast.Module]], declared: set[str]) -> list[str]:
    found: list[str] = []
    for path, tree in trees:
        rel = path.relative_to(BROKER.parent.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                is_setattr = isinstance(f, ast.Name) and f.id == "setattr"
                is_raw = isinstance(f, ast.Attribute) and f.attr == "__setattr__"
                if (is_setattr or is_raw) and node.args:
                    target = node.args[0]
                    if not (isinstance(target, ast.Name) and target.id in OWN):
                        found.append(f"{rel}:{node.lineno}: setattr on {ast.unparse(target)}")
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for t in targets:
                for el in ast.walk(t):
                    if not isinstance(el, ast.Attribute) or not isinstance(el.ctx, ast.Store):
                        continue
                    owner = el.value
                    if isinstance(owner, ast.Name) and owner.id in OWN:
                        continue
                    if el.attr not in declared:
                        found.append(
                            f"{rel}:{el.lineno}: {ast.unparse(el)} is not declared by any broker class"
                        )
    return found


def test_no_attribute_hung_on_broker_objects_from_outside() -> None:
    trees = _modules()
    assert len(trees) > 50, "the broker sources were not found"
    found = _foreign_writes(trees, _declared(trees))
    assert not found, "state hung on objects from outside their class:\n" + "\n".join(found)


def test_the_check_catches_a_hung_attribute() -> None:
    """The grep can fail: a module that hangs an undeclared attribute is reported."""
    trees = _modules()
    bad = ast.parse("def f(topic):\n    topic.policy_limits = {}\n    setattr(topic, 'x', 1)\n")
    found = _foreign_writes([(BROKER / "fake.py", bad)], _declared(trees))
    assert any("topic.policy_limits" in f for f in found)
    assert any("setattr on topic" in f for f in found)
