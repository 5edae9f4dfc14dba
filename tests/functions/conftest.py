"""Fixtures for the Functions / Pulsar IO tests: a ``magnetar standalone`` subprocess with its worker.

One standalone per module (start-up is the slow part); each test uses its own
function names and topics.  ``admin(...)`` runs ``magnetar admin`` (in-process by
default, a real subprocess with ``subprocess=True``), ``rest`` is an httpx client on the web URL.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from subprocess import CompletedProcess

import httpx
import pytest

from magnetar.testing.cli import run_admin
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "functions"


@pytest.fixture(scope="module")
def fn_standalone(tmp_path_factory: pytest.TempPathFactory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = StandaloneProcess(
        tmp_path_factory.mktemp("functions") / "data", extra_args=["--log-level", "INFO"]
    )
    proc.start()
    yield proc
    proc.terminate()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def client(fn_standalone):
    c = pulsar.Client(
        fn_standalone.broker_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )
    yield c
    c.close()


def admin(standalone, *args: str, check: bool = True, subprocess: bool = False) -> CompletedProcess[str]:
    """``magnetar admin`` against the standalone: in-process (magnetar.testing.cli), or a real
    ``python -m magnetar.cli.main`` with ``subprocess=True`` (each module keeps one such call)."""
    return run_admin(standalone.web_url, *args, check=check, subprocess=subprocess)


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def wait_running(
    standalone, name: str, n: int = 1, family: str = "functions", timeout_s: float = 30.0
) -> dict:
    def check():
        r = httpx.get(f"{standalone.web_url}/admin/v3/{family}/public/default/{name}/status", timeout=10)
        doc = r.json() if r.status_code == 200 else None
        return doc if doc and doc["numRunning"] >= n else None

    return wait_for(check, timeout_s, f"{name} running")
