"""A ``magnetar bookie`` whose ZooKeeper is gone still stops promptly on SIGTERM, exit status 0.

Before: its stop unregistered from ZooKeeper first, and each of the two deletes waited out the
30 s operation timeout, so SIGTERM took over a minute (a kit's stop then fell back to SIGKILL).
Unregistering is a courtesy -- the session's end removes the ephemeral node -- so with the
session down the bookie skips it, and with a store that merely does not answer it waits at most
``UNREGISTER_TIMEOUT_S``.  The ZooKeeper here is the test's own (it is stopped for good).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from magnetar.bookie.app import UNREGISTER_TIMEOUT_S
from magnetar.testing.zookeeper import ZooKeeperServer, require_zookeeper

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def own_zookeeper(tmp_path):
    require_zookeeper()
    zk = ZooKeeperServer(str(tmp_path / "zk"))
    zk.start()
    yield zk
    zk.close()


def _start_bookie(tmp_path, metadata_url: str, conf) -> subprocess.Popen:
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = open(tmp_path / "bookie.log", "wb")  # noqa: SIM115 -- handed to the child
    cmd = [sys.executable, "-m", "magnetar.cli.main", "bookie", "--data-dir", str(tmp_path / "bookie"),
           "--port", "0", "--advertised-address", "127.0.0.1", "--metadata-url", metadata_url,
           "--config", str(conf)]  # fmt: skip
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    finally:
        log.close()
    assert proc.stdout is not None
    for line in proc.stdout:  # bounded by the bookie's own start-up (it exits on failure)
        if line.startswith("magnetar bookie ready:"):
            return proc
    raise AssertionError(f"bookie exited {proc.wait()}: {(tmp_path / 'bookie.log').read_text()[-2000:]}")


def _sigterm(proc: subprocess.Popen) -> tuple[int, float]:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(UNREGISTER_TIMEOUT_S + 15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bookie still running {UNREGISTER_TIMEOUT_S + 15:.0f} s after SIGTERM")
    return code, time.monotonic() - t0


def test_sigterm_stops_a_bookie_whose_zookeeper_is_gone(own_zookeeper, tmp_path):
    """Two bookies: one is stopped right after ZooKeeper went, one after its session was lost."""
    url = f"{own_zookeeper.url.rstrip('/')}/bk"
    conf = tmp_path / "bookkeeper.conf"
    conf.write_text("zkTimeout=2000\n")  # the bookie's session timeout: lost 2 s after ZooKeeper goes
    procs = [_start_bookie(tmp_path / name, url, conf) for name in ("just-gone", "session-lost")]
    try:
        own_zookeeper.stop()
        results = {"just-gone": _sigterm(procs[0])}
        time.sleep(3.0)  # past zkTimeout: the second bookie declared its session lost
        results["session-lost"] = _sigterm(procs[1])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(f"SIGTERM with ZooKeeper gone: (exit status, seconds) {results}")
    for name, (code, took) in results.items():
        assert code == 0, (tmp_path / name / "bookie.log").read_text()[-2000:]
        assert took < UNREGISTER_TIMEOUT_S + 10, (name, took)
