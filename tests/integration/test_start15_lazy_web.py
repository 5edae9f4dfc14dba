"""``magnetar standalone`` is ready without FastAPI/pydantic; the first admin request builds them.

Issue 15 (start-up time and idle memory): the web service starts as a plain-ASGI front
(``web.front``) that serves ``/metrics``, HTTP lookup, ``/admin/v2/brokers/ready`` and the
WebSocket API itself; the FastAPI admin app is built by the first request that needs it.
The modules loaded at the ready line come from ``MAGNETAR_DEBUG_MODULES_AT_READY``
(``cli.standalone``).  On the code before the front, FastAPI and pydantic were loaded by
then (and the variable did not exist: no file).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

# Top-level packages a broker that only moves messages must not hold at ready.
NOT_AT_READY = ("fastapi", "pydantic", "pydantic_core", "httpx", "magnetar.common.rest_models")
# Other sub-commands' modules (cli.main imports only the chosen one).
OTHER_COMMANDS = ("magnetar.cli.admin", "magnetar.cli.client", "magnetar.cli.perf", "magnetar.cli.cluster")


def _get(url: str, timeout_s: float = 60.0) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return r.status, r.read()


@pytest.fixture
def lean_standalone(tmp_path: Path):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    modules_file = tmp_path / "modules-at-ready.txt"
    env = dict(os.environ, MAGNETAR_DEBUG_MODULES_AT_READY=str(modules_file))
    proc = StandaloneProcess(tmp_path / "data", env=env)
    proc.start()
    try:
        yield proc, modules_file
    finally:
        proc.terminate()


def test_ready_without_fastapi_then_first_admin_requests_build_it_once(lean_standalone) -> None:
    proc, modules_file = lean_standalone
    loaded = set(modules_file.read_text(encoding="utf-8").split())
    assert "magnetar.web.front" in loaded and "magnetar.cli.standalone" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in NOT_AT_READY or m in NOT_AT_READY)
    assert not heavy, f"loaded at ready: {heavy[:10]}"
    others = sorted(m for m in loaded if m.startswith(OTHER_COMMANDS))
    assert not others, f"other sub-commands imported: {others}"

    # What clients use from the first second is served by the front.
    status, body = _get(f"{proc.web_url}/metrics")
    assert status == 200 and b"magnetar_http_requests" in body
    status, body = _get(f"{proc.web_url}/lookup/v2/topic/persistent/public/default/start15-t")
    assert status == 200 and json.loads(body)["brokerUrl"] == proc.broker_url
    assert _get(f"{proc.web_url}/admin/v2/brokers/ready") == (200, b"ok")

    # Concurrent first admin requests: all wait for the one build and get the real answer.
    t0 = time.monotonic()
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _i: _get(f"{proc.web_url}/admin/v2/tenants"), range(6)))
    first_admin_s = time.monotonic() - t0
    assert all(status == 200 for status, _ in answers), answers
    assert all(sorted(json.loads(body)) == ["public", "pulsar"] for _, body in answers)
    # An admin write and read through the now-built app, and the fast paths still answer.
    req = urllib.request.Request(
        f"{proc.web_url}/admin/v2/namespaces/public/start15-ns", method="PUT", data=b"{}"
    )
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status in (200, 204)
    status, body = _get(f"{proc.web_url}/admin/v2/namespaces/public")
    assert "public/start15-ns" in json.loads(body)
    status, body = _get(f"{proc.web_url}/metrics")
    assert status == 200 and b'magnetar_http_requests_total{method="GET",status="2xx"}' in body
    print(f"first admin requests answered in {first_admin_s:.2f} s (the app's build)")
