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


def main() -> int:
    root = _root()
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
