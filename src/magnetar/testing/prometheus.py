"""A real Prometheus server for tests: find it, scrape a broker, query it over HTTP.

Theory of operation: Debian's ``prometheus`` package installs
``/usr/bin/prometheus`` (``.ci/run`` installs it).  :func:`find_prometheus`
returns the binary, trying ``apt-get install`` once when it is missing and
we are root.  :class:`PrometheusServer` writes a config with one scrape job
for the given targets (scrape interval ``SCRAPE_INTERVAL``), starts the
server on a free loopback port with its own TSDB directory, waits for
``/-/ready`` and offers :meth:`query` (the ``/api/v1/query`` instant query,
returning the result vector) and :meth:`wait_for` (poll a query until a
predicate over the vector holds).  ``stop`` terminates it.

pytest: :func:`require_prometheus` skips with the reason when the binary is
missing -- but fails when ``CI=true``, where a missing server is a broken
machine, not an optional extra.  ``MAGNETAR_PROMETHEUS`` overrides the path.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SCRAPE_INTERVAL = "1s"
START_TIMEOUT_S = 30.0
DEFAULT_PATHS = ("/usr/bin/prometheus", "/usr/local/bin/prometheus")


def _which() -> str | None:
    override = os.environ.get("MAGNETAR_PROMETHEUS")
    if override:
        return override if os.path.exists(override) else None
    found = shutil.which("prometheus")
    if found:
        return found
    return next((p for p in DEFAULT_PATHS if os.path.exists(p)), None)


def find_prometheus(install: bool = True) -> str | None:
    """The prometheus binary, installing Debian's package once if missing (root + apt-get only)."""
    found = _which()
    if found or not install:
        return found
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = "apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus"
        subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, timeout=600, check=False)
    return _which()


def require_prometheus() -> str:
    """The binary, or pytest skip (fail under CI=true) with the reason."""
    import pytest

    found = find_prometheus()
    if found:
        return found
    reason = "prometheus is not installed (apt-get install prometheus)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must have it (.ci/run installs it)")
    pytest.skip(reason)
    raise AssertionError("unreachable")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrometheusServer:
    def __init__(self, binary: str, targets: Sequence[str], workdir: str | None = None) -> None:
        self.binary = binary
        self.targets = list(targets)  # host:port of /metrics endpoints
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="prometheus-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        cfg = self.workdir / "prometheus.yml"
        targets = ", ".join(json.dumps(t) for t in self.targets)
        cfg.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_INTERVAL}\n"
            f"  scrape_timeout: {SCRAPE_INTERVAL}\n"
            "scrape_configs:\n"
            "  - job_name: magnetar\n"
            "    metrics_path: /metrics\n"
            f"    static_configs:\n      - targets: [{targets}]\n"
        )
        return cfg

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        cfg = self._write_config()
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 -- handed to the child
        try:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={cfg}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1.0) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready after {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        path = self.workdir / "prometheus.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query: the result vector (each item has ``metric`` labels and ``value``)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5.0) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {body}")
        return body["data"]["result"]

    def targets_health(self) -> list[str]:
        with urllib.request.urlopen(self.url + "/api/v1/targets", timeout=5.0) as r:
            body = json.loads(r.read())
        return [t.get("health", "") for t in body["data"]["activeTargets"]]

    def wait_for(
        self, expr: str, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 20.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if predicate(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr!r}: condition not met within {timeout_s} s; last result {result}")

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def values(result: list[dict[str, Any]]) -> list[float]:
    return [float(item["value"][1]) for item in result]
