"""``magnetar broker`` in a small cluster: ZooKeeper metadata, a ``magnetar bookie`` over TCP.

Everything runs as real processes, as an operator would start them: a
ZooKeeper server, two bookies (``magnetar bookie --metadata-url zk:...``) and
one broker (``magnetar broker --metadata-url zk:...``, only ``clusterName`` set);
the official client produces and consumes through the broker, and the data
lives on the bookies, every ledger at Pulsar's broker defaults E/Qw/Qa = 2/2/2.
A broker without ``clusterName`` refuses to start with a clear error.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]


class BrokerProcess(StandaloneProcess):
    """``magnetar broker`` with the same ready-line handling as the standalone helper."""

    def __init__(self, data_dir, metadata_url: str) -> None:
        super().__init__(data_dir)
        self.metadata_url = metadata_url

    def command(self, broker_port: int = 0, web_port: int = 0) -> list[str]:
        cmd = super().command(broker_port, web_port)
        cmd[cmd.index("standalone")] = "broker"
        return cmd + ["--metadata-url", self.metadata_url]


def _start_bookie(tmp_path, metadata_url: str, name: str = "bookie") -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "magnetar.cli.main", "bookie", "--data-dir", str(tmp_path / name)]
    cmd += ["--port", "0", "--advertised-address", "127.0.0.1", "--metadata-url", metadata_url]
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 -- handed to the child
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "magnetar bookie ready" not in line:
        proc.kill()
        pytest.fail(f"bookie did not start: {line!r}; log:\n{(tmp_path / f'{name}.log').read_text()[-2000:]}")
    return proc


def test_broker_with_remote_bookie_and_zookeeper(tmp_path, zookeeper_server):
    chroot = f"/magnetar-{uuid.uuid4().hex[:8]}"
    url = f"zk:{zookeeper_server.hosts}{chroot}"
    # Two bookies: the broker's defaults (Pulsar's broker.conf) write every entry to 2 of 2.
    bookies = [_start_bookie(tmp_path, url, f"bookie{i}") for i in range(2)]
    conf = tmp_path / "broker.conf"
    conf.write_text("clusterName=test-cluster\n")
    broker = BrokerProcess(tmp_path / "broker", url)
    broker.config_file = conf
    try:
        broker.start(timeout_s=60)
        client = pulsar.Client(
            broker.broker_url,
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        )
        topic = f"persistent://public/default/cluster-{uuid.uuid4().hex[:6]}"
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=2)
        for i in range(200):
            producer.send_async(f"c{i}".encode(), None)
        producer.flush()
        got = [consumer.receive(timeout_millis=10_000).data() for _ in range(200)]
        assert got == [f"c{i}".encode() for i in range(200)]
        producer.close()
        consumer.close()
        client.close()
        assert broker.terminate() == 0, broker.log_tail()
        # the messages live on the bookie: a new broker process reads them back
        broker.restart(same_ports=False, timeout_s=60)
        client = pulsar.Client(
            broker.broker_url,
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        )
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert reader.read_next(timeout_millis=10_000).data() == b"c0"
        reader.close()
        client.close()
        quorums = asyncio.run(_ledger_quorums(url))
        assert quorums and set(quorums) == {(2, 2, 2)}, quorums
    finally:
        code = broker.terminate()
        for bookie in bookies:
            bookie.terminate()
            bookie.wait(30)
    assert code == 0, broker.log_tail()


async def _ledger_quorums(url: str) -> list[tuple[int, int, int]]:
    """(E, Qw, Qa) of every ledger the broker created, read from the metadata store."""
    from magnetar.bookkeeper.metadata import LedgerMetadataStore
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    store = await create_metadata_store(url, clock=RealClock())
    try:
        ledgers = LedgerMetadataStore(store)
        out = []
        for lid in await ledgers.list_ids():
            md, _ = await ledgers.read(lid)
            out.append((md.ensemble_size, md.write_quorum, md.ack_quorum))
        return out
    finally:
        await store.aclose()


def test_broker_without_cluster_name_refuses_to_start(tmp_path):
    """Pulsar's broker.conf has no default clusterName: a clear error, exit 2, before any I/O."""
    cmd = [sys.executable, "-m", "magnetar.cli.main", "broker", "--metadata-url", "zk:127.0.0.1:1"]
    cmd += ["--data-dir", str(tmp_path / "b")]
    env = {k: v for k, v in os.environ.items() if k != "clusterName"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2
    assert "clusterName is required" in done.stderr
