"""``magnetar client`` and ``magnetar perf`` against a real standalone with the official client blocked.

Each command runs as a subprocess in which ``import pulsar`` fails, as after a
plain ``pip install magnetar`` without pulsar-client.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

BLOCKED = "import sys; sys.modules['pulsar'] = None; sys.modules['_pulsar'] = None; "


def _magnetar(*argv: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKED + f"from magnetar.cli.main import main; sys.exit(main({list(argv)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_client_produce_consume_read_without_pulsar_client(standalone):
    topic = f"persistent://public/default/cli-{uuid.uuid4().hex[:8]}"
    url = standalone.broker_url
    cons = _magnetar("client", "--url", url, "consume", topic, "-s", "sub", "-n", "0", "--timeout", "0.5")
    assert cons.returncode == 0, cons.stderr  # creates the subscription
    prod = _magnetar("client", "--url", url, "produce", topic, "-m", "hello,world", "-k", "k1", "-p", "a=1")
    assert prod.returncode == 0, prod.stderr
    assert "2 messages successfully produced" in prod.stdout
    cons = _magnetar("client", "--url", url, "consume", topic, "-s", "sub", "-n", "2", "--timeout", "20")
    assert cons.returncode == 0, cons.stderr
    assert [ln for ln in cons.stdout.splitlines() if ln.startswith("key:")] == [
        "key:[k1], properties:[a=1], content:hello",
        "key:[k1], properties:[a=1], content:world",
    ]
    read = _magnetar("client", "--url", url, "read", topic, "-m", "earliest", "-n", "2", "--timeout", "20")
    assert read.returncode == 0 and "2 messages successfully read" in read.stdout, read.stderr


def test_perf_without_pulsar_client(standalone):
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    url = standalone.broker_url
    prod = _magnetar("perf", "produce", topic, "-u", url, "-r", "0", "-m", "2000", "-s", "64", "-i", "1")
    assert prod.returncode == 0, prod.stderr
    m = re.search(
        r"^Produced total:\s+([\d.]+) msg/s --- +([\d.]+) MB/s --- latency ms: mean", prod.stdout, re.M
    )
    assert m and float(m.group(1)) > 0, prod.stdout
