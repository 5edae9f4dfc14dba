"""``magnetar client produce`` then ``consume`` as real processes, with the official client, over TCP.

The broker is ``benchmarks/null_broker.py`` (the protocol codec with an
in-memory log), started as a subprocess; the test skips if it is missing.
The same flow against the real standalone belongs to the integration tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pulsar")

NULL_BROKER = Path(__file__).resolve().parents[3] / "benchmarks" / "null_broker.py"

pytestmark = pytest.mark.compat


@pytest.fixture
def broker_url():
    if not NULL_BROKER.exists():
        pytest.skip("benchmarks/null_broker.py is not there")
    proc = subprocess.Popen(
        [sys.executable, str(NULL_BROKER), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()  # "null broker ready: pulsar://127.0.0.1:PORT"
        if "ready:" not in line:
            pytest.skip(f"null broker did not start: {line!r}")
        yield line.split("ready:")[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _client(url: str, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PULSAR_CLIENT_CONF"}
    return subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", "client", "--url", url, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_produce_then_consume_from_earliest(broker_url):
    prod = _client(
        broker_url,
        "produce",
        "persistent://public/default/cli-t",
        "-m",
        "hello,world",
        "-n",
        "2",
        "-k",
        "k1",
        "-p",
        "a=1",
    )
    assert prod.returncode == 0, prod.stderr
    assert "4 messages successfully produced" in prod.stdout
    cons = _client(
        broker_url,
        "consume",
        "persistent://public/default/cli-t",
        "-s",
        "sub",
        "-p",
        "Earliest",
        "-n",
        "4",
        "--timeout",
        "30",
    )
    assert cons.returncode == 0, cons.stderr
    lines = cons.stdout.splitlines()
    assert lines.count("----- got message -----") == 4
    assert [ln for ln in lines if ln.startswith("key:")] == [
        "key:[k1], properties:[a=1], content:hello",
        "key:[k1], properties:[a=1], content:world",
    ] * 2
    assert lines[-1] == "4 messages successfully consumed"
    assert "INFO" not in cons.stdout  # the library logs at Warn by default
