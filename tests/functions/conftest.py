"""Fixtures for the Functions / Pulsar IO tests: a ``magnetar standalone`` subprocess with its worker.

One standalone with its functions worker for every module that uses ``fn_standalone`` (start-up
is the slow part: ~4-7 s a module on a loaded machine): a session fixture, stopped right after
the last test that uses it (``stop_after_last_user``).  Modules that need their own config (token
auth, a ZooKeeper cluster, a worker killed with -9) start their own.  Each test uses its own
function names and topics (a ``unique`` suffix), so tests do not see each other's functions; at
the end of each module the functions, sources and sinks it left in public/default are deleted,
so a module starts with an empty namespace and no instance of an earlier module keeps running
(a sink retrying a stopped PostgreSQL, a spinning function) while its CPU figures are measured.
``admin(...)`` runs ``magnetar admin`` (in-process by default, a real subprocess with
``subprocess=True``).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from subprocess import CompletedProcess

import httpx
import pytest

from magnetar.testing.cli import run_admin
from magnetar.testing.standalone import StandaloneProcess, serving, stop_after_last_user

pulsar = pytest.importorskip("pulsar")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "functions"


FAMILIES = ("functions", "sources", "sinks")


@pytest.fixture(scope="session")
def fn_worker_standalone(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The standalone (broker + functions worker) the modules share; see the module docstring."""
    served = serving(
        StandaloneProcess(tmp_path_factory.mktemp("functions") / "data", extra_args=["--log-level", "INFO"])
    )
    proc = next(served)
    stop_after_last_user(request, proc.terminate)
    yield proc
    yield from served  # the kit's teardown: it must have exited 0


@pytest.fixture(scope="module")
def fn_standalone(fn_worker_standalone: StandaloneProcess):
    """The shared standalone, for one module: what the module created is deleted after it."""
    yield fn_worker_standalone
    delete_everything(fn_worker_standalone)


def delete_everything(standalone: StandaloneProcess, namespace: str = "public/default") -> None:
    """Delete every function, source and sink in ``namespace``; an error here fails the module's
    last test's teardown (a delete that does not work is a finding)."""
    with httpx.Client(base_url=f"{standalone.web_url}/admin/v3", timeout=60) as http:
        for family in FAMILIES:
            r = http.get(f"/{family}/{namespace}")
            r.raise_for_status()
            for name in r.json():
                d = http.delete(f"/{family}/{namespace}/{name}")
                assert d.status_code in (200, 204, 404), f"delete {family} {name}: {d.status_code} {d.text}"


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
