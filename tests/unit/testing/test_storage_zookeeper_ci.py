"""Under CI=true a ZooKeeper test whose server cannot run FAILS; elsewhere it skips.

A tiny test module using the shipped ``zookeeper_server`` fixture is run by a
child pytest with the jar pointed at a path that does not exist.  The same
path the fixture looks at first is the one ``.ci/run`` installs and checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from magnetar.testing.zookeeper import DEFAULT_JARS, in_ci

MODULE = """
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

def test_needs_zookeeper(zookeeper_server):
    assert zookeeper_server.running
"""


def _run(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_needs_zk_child.py"
    test.write_text(MODULE)
    env = {**os.environ, "CI": ci, "MAGNETAR_ZK_JAR": str(tmp_path / "no-such-zookeeper.jar")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(test)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def test_missing_zookeeper_fails_under_ci(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = _run(tmp_path, "true")
    assert done.returncode == 1, done.stdout
    assert "ZooKeeper unavailable under CI=true" in done.stdout
    assert "skipped" not in done.stdout


def test_missing_zookeeper_skips_outside_ci(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = _run(tmp_path, "")
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout


def test_ci_run_checks_the_fixtures_jar() -> None:
    script = (Path(__file__).resolve().parents[3] / ".ci" / "run").read_text()
    assert f"ZK_JAR={DEFAULT_JARS[0]}" in script
    assert in_ci({"CI": "true"}) and not in_ci({}) and not in_ci({"CI": "false"})
