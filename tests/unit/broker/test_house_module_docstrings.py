"""Each broker module opens with its theory of operation (DESIGN.md's house rule).

Every module under ``src/magnetar/broker`` -- packages' ``__init__`` included --
must start with a module docstring of at least a sentence (40 characters);
a new module without one fails here with its path.
"""

from __future__ import annotations

import ast
from pathlib import Path

import magnetar.broker

BROKER = Path(magnetar.broker.__file__).resolve().parent
MIN_CHARS = 40


def _lacking(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if doc is None or len(doc.strip()) < MIN_CHARS:
            out.append(path.relative_to(root.parent).as_posix())
    return out


def test_every_broker_module_opens_with_its_theory_of_operation() -> None:
    modules = list(BROKER.rglob("*.py"))
    assert len(modules) > 100, len(modules)
    lacking = _lacking(BROKER)
    assert not lacking, f"modules without an opening docstring: {lacking}"


def test_the_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "broker"
    pkg.mkdir()
    (pkg / "good.py").write_text('"""A module that says what it does and how it does it."""\n')
    (pkg / "bare.py").write_text("x = 1\n")
    (pkg / "terse.py").write_text('"""Helpers."""\n')
    assert _lacking(pkg) == ["broker/bare.py", "broker/terse.py"]
