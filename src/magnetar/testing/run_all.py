"""The whole test command: lint, layer contracts, then pytest.

Theory of operation: CI (``.ci/run``) and the README run exactly this module,
so "the tests" mean one thing everywhere.  It runs ruff, import-linter (the
layer arrows of DESIGN.md) and pytest with the default marker selection (slow
soak/simulation runs are deselected; set MAGNETAR_SLOW=1 to include them).
Exit status is non-zero if any step fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _root() -> Path:
    here = Path.cwd()
    for p in (here, *here.parents):
        if (p / "pyproject.toml").exists() and (p / "src" / "magnetar").exists():
            return p
    return here


def duplicate_test_basenames(root: Path) -> list[str]:
    """Test modules sharing a basename: tests/ has no __init__.py files (helpers are imported
    by plain name), so pytest's default import mode cannot collect two files with one name."""
    seen: dict[str, Path] = {}
    dups: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        if path.name in ("conftest.py", "__init__.py"):
            continue
        if path.name in seen:
            dups.append(f"{seen[path.name].relative_to(root)} and {path.relative_to(root)}")
        else:
            seen[path.name] = path
    return dups


def main() -> int:
    root = _root()
    dups = duplicate_test_basenames(root)
    if dups:
        print("test modules must have unique basenames; rename one of each pair:", *dups, sep="\n  ")
        return 2
    bindir = Path(sys.executable).parent
    steps: list[list[str]] = [
        [str(bindir / "ruff"), "check", "src", "tests", "benchmarks"],
        [str(bindir / "lint-imports"), "--config", "pyproject.toml"],
    ]
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-ra", "--durations=15"]
    if os.environ.get("MAGNETAR_SLOW"):
        pytest_cmd += ["-m", ""]
    pytest_cmd += sys.argv[1:]
    steps.append(pytest_cmd)
    for cmd in steps:
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=root)
        if rc != 0:
            print(f"step failed with exit code {rc}: {' '.join(cmd)}", flush=True)
            return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
