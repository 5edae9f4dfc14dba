"""``brokerShutdownTimeoutMs`` bounds a cluster broker's graceful stop, ZooKeeper gone or not.

With its ZooKeeper stopped for good, a broker's stop used to wait out two 30 s stage bounds
(unloading bundles and closing ledgers each need metadata writes that never get an answer):
SIGTERM took over a minute whatever brokerShutdownTimeoutMs said.  Now the whole stop is
bounded by it (as in Pulsar: after it the process goes), plus a few seconds the storage keeps
for its own last writes; the exit status is still 0.  The ZooKeeper is the test's own.
"""

from __future__ import annotations

import signal
import time

import pulsar
import pytest

from magnetar.testing.cluster import ClusterProcesses
from magnetar.testing.zookeeper import ZooKeeperServer, require_zookeeper

pytestmark = pytest.mark.zookeeper

SHUTDOWN_MS = 3000


def test_sigterm_without_zookeeper_stops_within_broker_shutdown_timeout(tmp_path):
    require_zookeeper()
    zk = ZooKeeperServer(str(tmp_path / "zk"))
    zk.start()
    try:
        props = {"brokerShutdownTimeoutMs": str(SHUTDOWN_MS)}
        with ClusterProcesses(
            tmp_path / "c", brokers=1, bookies=1, zookeeper_url=zk.url, broker_properties=props
        ) as cl:
            client = pulsar.Client(cl.service_url, operation_timeout_seconds=30)
            try:
                producers = [client.create_producer(f"persistent://public/default/st-{i}") for i in range(3)]
                for p in producers:
                    p.send(b"x")
            finally:
                client.close()
            zk.close()  # for good: every metadata write of the stop goes unanswered
            name = cl.names("broker")[0]
            proc = cl.procs[name]
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            limit = SHUTDOWN_MS / 1000 + 5 + 20  # the bound, the storage's floor, a slow box
            try:
                code = proc.wait(limit)
            except Exception:
                pytest.fail(f"broker still running {limit:.0f} s after SIGTERM:\n{cl.log(name, 40)}")
            took = time.monotonic() - t0
            assert code == 0, cl.log(name, 40)
            assert took < limit
            assert "giving up on it" in cl.log(name, 400)  # the bound, not luck, ended the stop
    finally:
        zk.close()
