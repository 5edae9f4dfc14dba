"""Standalone brokers for tests: in-process (async) and as a real subprocess.

Theory of operation: two ways to get a broker a client can talk to.

* :func:`running_standalone` -- an ``async with`` that starts a
  :class:`~magnetar.app.standalone.Standalone` in the test's own event loop on
  free ports (0) under a temporary data dir, yields it (``.broker_url``,
  ``.web_url``, ``.broker_service``) and closes it.  Fast; use it for tests
  that speak the protocol from asyncio.
* :class:`StandaloneProcess` -- ``python -m magnetar.cli.main standalone`` as a
  child process, exactly as a user runs it.  ``start()`` waits for the one
  ``magnetar ready: pulsar://... http://...`` line (bounded by a timeout) and
  parses the URLs; ``terminate()`` sends SIGTERM and waits for exit 0,
  ``kill()`` is ``kill -9``, ``restart()`` starts again on the same data dir
  (and by default the same ports, so URLs held by a test stay valid).  The
  child's stderr goes to ``<data dir>.log`` so a failing test can show it.
  This is what the official C++-based ``pulsar-client`` needs: its own threads
  block, so the broker must not share the test's loop.

pytest fixtures built on these live in the test suites' ``conftest.py``
(``tests/compat``, ``tests/e2e``); this module only provides the pieces.
A broker several modules share is a session-scoped fixture, which pytest
would keep until the whole run ends: :func:`stop_after_last_user` stops it
in the teardown of the last collected test that uses it instead, so it does
not idle (policy passes, stats ticks) through every later directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

READY_RE = re.compile(r"^magnetar ready: (pulsar://\S+) (http://\S+)\s*$")
START_TIMEOUT_S = 120.0  # a bound, not a wait: starts took > 60 s on a loaded 2-core machine (ClusterProcesses: 120 s too)
STOP_TIMEOUT_S = 30.0


class StandaloneStartError(RuntimeError):
    pass


def broker_unavailable_reason() -> str | None:
    """Why a standalone cannot run in this build (a piece not built yet), or None if it can."""
    try:
        from magnetar.app.storage import open_standalone_storage  # noqa: F401
        from magnetar.broker.service import BrokerService  # noqa: F401
    except ImportError as exc:
        return f"the broker is not built yet: {exc}"
    return None


@contextlib.asynccontextmanager
async def running_standalone(
    data_dir: str | os.PathLike[str],
    properties: Mapping[str, str] | None = None,
    *,
    storage: object | None = None,
) -> AsyncIterator[object]:
    """An in-process Standalone on free ports (127.0.0.1) under ``data_dir``."""
    from magnetar.app.config import load_standalone_config
    from magnetar.app.standalone import Standalone

    overrides = {
        "brokerServicePort": "0",
        "webServicePort": "0",
        "bindAddress": "127.0.0.1",
        "advertisedAddress": "127.0.0.1",
        **(properties or {}),
    }
    config = load_standalone_config(None, data_dir=data_dir, overrides=overrides)
    standalone = Standalone(config, storage=storage)  # type: ignore[arg-type]
    await standalone.start()
    try:
        yield standalone
    finally:
        await standalone.aclose()


@dataclass
class ReadyInfo:
    broker_url: str
    web_url: str

    @property
    def broker_port(self) -> int:
        return int(self.broker_url.rsplit(":", 1)[1])

    @property
    def web_port(self) -> int:
        return int(self.web_url.rsplit(":", 1)[1])


class StandaloneProcess:
    """A ``magnetar standalone`` child process."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        config_file: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self.config_file = config_file
        self.extra_args = list(extra_args)
        self.env = dict(env) if env is not None else None
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready: ReadyInfo | None = None
        self.startup_seconds: float = 0.0
        self._drain: threading.Thread | None = None

    @property
    def broker_url(self) -> str:
        assert self.ready is not None, "not started"
        return self.ready.broker_url

    @property
    def web_url(self) -> str:
        assert self.ready is not None, "not started"
        return self.ready.web_url

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self, broker_port: int = 0, web_port: int = 0) -> list[str]:
        cmd = [self.python, "-m", "magnetar.cli.main", "standalone", "--data-dir", str(self.data_dir)]
        cmd += ["--broker-port", str(broker_port), "--web-port", str(web_port)]
        cmd += ["--advertised-address", "127.0.0.1", "--bind-address", "127.0.0.1"]
        if self.config_file:
            cmd += ["--config", str(self.config_file)]
        return cmd + self.extra_args

    def start(
        self, *, broker_port: int = 0, web_port: int = 0, timeout_s: float = START_TIMEOUT_S
    ) -> ReadyInfo:
        if self.proc is not None and self.proc.poll() is None:
            raise StandaloneStartError("already running")
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 -- handed to the child, closed below
        log.write(f"\n--- start {time.strftime('%H:%M:%S')} ---\n".encode())
        log.flush()
        t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.command(broker_port, web_port),
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=self.env,
            )
        finally:
            log.close()
        self.ready = self._wait_ready(timeout_s)
        self.startup_seconds = time.monotonic() - t0
        return self.ready

    def _wait_ready(self, timeout_s: float) -> ReadyInfo:
        assert self.proc is not None and self.proc.stdout is not None
        found: list[ReadyInfo] = []
        other: list[str] = []
        done = threading.Event()
        stdout = self.proc.stdout

        def reader() -> None:
            for raw in stdout:  # keeps draining after ready so the child never blocks on a full pipe
                line = raw.decode("utf-8", "replace")
                m = READY_RE.match(line)
                if m and not found:
                    found.append(ReadyInfo(m.group(1), m.group(2)))
                    done.set()
                elif len(other) < 100:
                    other.append(line.rstrip())
            done.set()

        self._drain = threading.Thread(target=reader, name="standalone-stdout", daemon=True)
        self._drain.start()
        if not done.wait(timeout_s) or not found:
            exited = self.proc.poll()
            if exited is None and done.is_set():  # stdout ended: the child is exiting, let it finish
                try:
                    exited = self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    exited = None
            self.kill()
            what = (
                f"exited with code {exited} before its ready line"
                if exited is not None
                else f"did not print its ready line within {timeout_s:.0f} s"
            )
            raise StandaloneStartError(
                f"standalone {what}; stdout: {other[-5:]}; log tail:\n{self.log_tail()}"
            )
        return found[0]

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; returns the exit code (kills after the timeout and returns -9)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._join_drain()
        return self.proc.returncode

    def kill(self) -> None:
        """``kill -9``: no flush, no goodbye."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(STOP_TIMEOUT_S)
        self._join_drain()

    def _join_drain(self) -> None:
        if self._drain is not None:
            self._drain.join(5.0)
            self._drain = None

    def restart(self, *, same_ports: bool = True, timeout_s: float = START_TIMEOUT_S) -> ReadyInfo:
        """Start again on the same data dir (after ``terminate``/``kill``, or it kills first)."""
        previous = self.ready
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        if same_ports and previous is not None:
            return self._start_retrying_ports(previous, timeout_s)
        return self.start(timeout_s=timeout_s)

    def _start_retrying_ports(self, previous: ReadyInfo, timeout_s: float) -> ReadyInfo:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.start(
                    broker_port=previous.broker_port, web_port=previous.web_port, timeout_s=timeout_s
                )
            except StandaloneStartError:
                # The old ports may linger for a moment after a kill -9; retry until the deadline.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def __enter__(self) -> StandaloneProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()


def start_together(procs: Sequence[StandaloneProcess], timeout_s: float = START_TIMEOUT_S) -> None:
    """Starts several standalones at once (start-up is mostly imports and waiting: two on two
    cores take little longer than one); if any fails, the others are killed and its error raised."""
    errors: list[BaseException] = []

    def start(proc: StandaloneProcess) -> None:
        try:
            proc.start(timeout_s=timeout_s)
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(p,), name="standalone-start") for p in procs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for proc in procs:
            proc.kill()
        raise errors[0]


def serving(proc: StandaloneProcess) -> Iterator[StandaloneProcess]:
    """The body of a fixture serving ``proc``: skips (pytest) when the broker is not built,
    starts it, yields it, and after the tests stops it with SIGTERM, failing unless it exits 0
    (a broker that crashed or hung at shutdown is a finding, not noise)."""
    import pytest

    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc.start()
    yield proc
    code = proc.terminate()
    assert code == 0, f"standalone exited {code}; log tail:\n{proc.log_tail()}"


def stop_after_last_user(request: object, stop: Callable[[], object]) -> None:
    """From a session-scoped fixture: ``stop()`` runs in the teardown of the last collected test
    whose fixture closure includes this fixture (the fixture's own teardown still runs at the
    end of the run; ``stop`` must tolerate being called twice -- ``StandaloneProcess.terminate``
    does).  If that test never runs (``-x``, another xdist worker), the run's end stops it."""
    import pytest

    name = request.fixturename  # type: ignore[attr-defined]
    session = request.session  # type: ignore[attr-defined]
    # The users of *this* definition: several directories' conftests define a fixture of the
    # same name (``standalone`` in tests/client and tests/compat), each its own broker.
    # pytest (9.2) has no public API for a fixture's definition: FixtureRequest gives its name,
    # scope, node and session, an item its fixture *names*; the definition a request serves
    # (request._fixturedef) and the ones an item resolves to (item._fixtureinfo) are private.
    # So they are read here, and tests/unit/testing/test_kit_stop_after_last_user.py is their
    # guard: without them two same-named fixtures collide (or one stops too late) and it fails.
    mine = getattr(request, "_fixturedef", None)

    def uses_mine(item: object) -> bool:
        if name not in getattr(item, "fixturenames", ()):
            return False
        info = getattr(item, "_fixtureinfo", None)
        defs = getattr(info, "name2fixturedefs", {}).get(name) if info is not None else None
        return mine is None or not defs or defs[-1] is mine

    users = [it.nodeid for it in session.items if uses_mine(it)]
    if not users:
        return
    last = users[-1]
    manager = session.config.pluginmanager

    class _StopAfterLastUser:
        @pytest.hookimpl(trylast=True)
        def pytest_runtest_teardown(self, item: object, nextitem: object) -> None:
            if item.nodeid == last:  # type: ignore[attr-defined]
                manager.unregister(self)
                stop()

    manager.register(_StopAfterLastUser(), f"stop-after-last-user-{name}-{id(mine):x}")


def unique_topic(test_name: str, limit: int = 50, namespace: str = "public/default") -> str:
    """``persistent://<namespace>/<test name>-<8 hex>``: a fresh topic per test, named after it."""
    base = test_name.replace("[", "-").replace("]", "").replace("/", "-")[:limit]
    return f"persistent://{namespace}/{base}-{uuid.uuid4().hex[:8]}"


# --- pytest fixtures -------------------------------------------------------------------------
# Import them into a conftest.py to use them:
#     from magnetar.testing.standalone import inprocess_standalone, standalone_process  # noqa: F401

try:
    import pytest
    import pytest_asyncio
except ImportError:  # the kit is usable without pytest; the fixtures are not defined then
    pass
else:

    @pytest_asyncio.fixture
    async def inprocess_standalone(tmp_path: Path) -> AsyncIterator[object]:
        """A Standalone in the test's event loop, on free ports, under ``tmp_path``."""
        reason = broker_unavailable_reason()
        if reason:
            pytest.skip(reason)
        async with running_standalone(tmp_path / "standalone-data") as sa:
            yield sa

    @pytest.fixture
    def standalone_process(tmp_path: Path):
        """A ``magnetar standalone`` subprocess (function scope); terminated after the test."""
        reason = broker_unavailable_reason()
        if reason:
            pytest.skip(reason)
        proc = StandaloneProcess(tmp_path / "standalone-data")
        proc.start()
        yield proc
        proc.terminate()
