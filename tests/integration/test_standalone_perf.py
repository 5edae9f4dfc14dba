"""``magnetar perf`` against a real standalone: it produces, consumes and reports."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pytest.importorskip("pulsar")
pytestmark = pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet")

TOTAL_RE = re.compile(
    r"^(Produced|Consumed) total:\s+([\d.]+) msg/s --- +([\d.]+) MB/s --- latency ms: mean ([\d.]+)", re.M
)


def _perf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", "perf", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_perf_produce_then_consume_backlog(tmp_path):
    with StandaloneProcess(tmp_path / "data") as sa:
        # create the subscription first so the backlog is kept for it
        cons = _perf("consume", "perf-it", "-u", sa.broker_url, "-m", "1", "--test-duration", "2", "-i", "1")
        assert cons.returncode == 0, cons.stderr[-2000:]
        prod = _perf(
            "produce", "perf-it", "-u", sa.broker_url, "-r", "0", "-m", "3000", "-s", "512", "-i", "1"
        )
        assert prod.returncode == 0, prod.stderr[-2000:]
        m = TOTAL_RE.search(prod.stdout)
        assert m and m.group(1) == "Produced" and float(m.group(2)) > 0, prod.stdout
        cons = _perf(
            "consume", "perf-it", "-u", sa.broker_url, "-m", "3000", "--test-duration", "60", "-i", "1"
        )
        assert cons.returncode == 0, cons.stderr[-2000:]
        m = TOTAL_RE.search(cons.stdout)
        assert m and m.group(1) == "Consumed", cons.stdout
        # 3000 messages of 512 B were read back
        rate, mbps = float(m.group(2)), float(m.group(3))
        assert rate > 0 and abs(mbps / rate * 1024 * 1024 - 512) < 1, cons.stdout
