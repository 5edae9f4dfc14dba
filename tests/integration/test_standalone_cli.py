"""``magnetar standalone`` as a user runs it: ready line, config layers, signals, data dir."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from magnetar.testing.standalone import READY_RE, StandaloneProcess, broker_unavailable_reason

needs_broker = pytest.mark.skipif(
    broker_unavailable_reason() is not None, reason="the broker is not built yet"
)


def test_bad_config_value_exits_2_with_a_message(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("brokerServicePort=not-a-number\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "magnetar.cli.main",
            "standalone",
            "--config",
            str(conf),
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "brokerServicePort" in res.stderr
    assert not READY_RE.search(res.stdout)


def test_missing_config_file_exits_2(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", "standalone", "--config", str(tmp_path / "nope.conf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "cannot read config file" in res.stderr


@needs_broker
def test_ready_line_health_lookup_and_sigterm(tmp_path):
    conf = tmp_path / "standalone.conf"
    # the file asks for fixed ports; the flags (port 0) must win
    conf.write_text(
        "brokerServicePort=1\nwebServicePort=2\nclusterName=standalone\n"
        "allowAutoTopicCreationType=partitioned\ndefaultNumPartitions=3\n"
    )
    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    ready = proc.start()
    try:
        assert ready.broker_url.startswith("pulsar://127.0.0.1:") and ready.broker_port not in (0, 1)
        assert ready.web_url.startswith("http://127.0.0.1:") and ready.web_port not in (0, 2)
        with urllib.request.urlopen(f"{ready.web_url}/admin/v2/brokers/health", timeout=15) as r:
            assert r.read() == b"ok"
        with urllib.request.urlopen(
            f"{ready.web_url}/lookup/v2/topic/persistent/public/default/t", timeout=15
        ) as r:
            body = json.loads(r.read())
        assert body["brokerUrl"] == ready.broker_url and "brokerUrlTls" in body
        with urllib.request.urlopen(f"{ready.web_url}/metrics", timeout=15) as r:
            metrics = r.read()
        assert b"magnetar_http_requests_total" in metrics and b"magnetar_broker_connections" in metrics
        # broker settings from the file reach the broker: auto-created topics are partitioned
        auto = f"{ready.web_url}/admin/v2/persistent/public/default/auto-made/partitions"
        with urllib.request.urlopen(auto + "?checkAllowAutoCreation=true", timeout=15) as r:
            assert json.loads(r.read()) == {"partitions": 3}
        assert (tmp_path / "data" / "metadata").is_dir()
        assert (tmp_path / "data" / "bookie").is_dir()
    finally:
        code = proc.terminate()
    assert code == 0, proc.log_tail()


@needs_broker
def test_restart_on_same_data_dir_keeps_namespaces_and_partitioned_topics(tmp_path):
    proc = StandaloneProcess(tmp_path / "data")
    ready = proc.start()
    try:
        url = f"{ready.web_url}/admin/v2/persistent/public/default/keep/partitions"
        req = urllib.request.Request(
            url, data=b"3", method="PUT", headers={"Content-Type": "application/json"}
        )
        urllib.request.urlopen(req, timeout=15).close()
        assert proc.terminate() == 0
        ready = proc.restart(same_ports=False)
        url = f"{ready.web_url}/admin/v2/persistent/public/default/keep/partitions"
        with urllib.request.urlopen(url, timeout=15) as r:
            assert json.loads(r.read()) == {"partitions": 3}
    finally:
        code = proc.terminate()
    assert code == 0, proc.log_tail()


@needs_broker
async def test_in_process_standalone_serves_http_lookup(tmp_path):
    import httpx

    from magnetar.testing.standalone import running_standalone

    async with running_standalone(tmp_path / "data") as sa:
        async with httpx.AsyncClient(base_url=sa.web_url, timeout=10) as http:
            r = await http.get("/lookup/v2/topic/persistent/public/default/x")
            assert r.status_code == 200 and r.json()["brokerUrl"] == sa.broker_url
            r = await http.get("/lookup/v2/topic/persistent/nobody/nothing/x")
            assert r.status_code == 404 and "reason" in r.json()
    assert sa.state.value == "stopped"


@needs_broker
def test_second_standalone_on_the_same_data_dir_is_refused(tmp_path):
    from magnetar.testing.standalone import StandaloneStartError

    first = StandaloneProcess(tmp_path / "data")
    first.start()
    try:
        second = StandaloneProcess(tmp_path / "data")
        with pytest.raises(StandaloneStartError, match="exited with code 1") as info:
            second.start(timeout_s=30)
        assert "metadata" in str(info.value)
    finally:
        code = first.terminate()
    assert code == 0


@needs_broker
def test_environment_variables_configure_the_broker(tmp_path):
    import os

    env = dict(os.environ, allowAutoTopicCreationType="partitioned", PULSAR_PREFIX_defaultNumPartitions="2")
    proc = StandaloneProcess(tmp_path / "data", env=env)
    ready = proc.start()
    try:
        auto = f"{ready.web_url}/admin/v2/persistent/public/default/env-made/partitions?checkAllowAutoCreation=true"
        with urllib.request.urlopen(auto, timeout=15) as r:
            assert json.loads(r.read()) == {"partitions": 2}
    finally:
        code = proc.terminate()
    assert code == 0, proc.log_tail()


@needs_broker
def test_wipe_data_starts_from_scratch(tmp_path):
    proc = StandaloneProcess(tmp_path / "data", extra_args=["-nss"])
    ready = proc.start()
    url = "/admin/v2/persistent/public/default/wiped/partitions"
    req = urllib.request.Request(
        ready.web_url + url, data=b"2", method="PUT", headers={"Content-Type": "application/json"}
    )
    urllib.request.urlopen(req, timeout=15).close()
    assert proc.terminate() == 0
    wiped = StandaloneProcess(tmp_path / "data", extra_args=["--wipe-data"])
    ready = wiped.start()
    try:
        with urllib.request.urlopen(ready.web_url + url, timeout=15) as r:
            assert json.loads(r.read()) == {"partitions": 0}
        # the defaults are created again on the fresh data dir
        with urllib.request.urlopen(ready.web_url + "/admin/v2/brokers/health", timeout=15) as r:
            assert r.read() == b"ok"
    finally:
        code = wiped.terminate()
    assert code == 0, wiped.log_tail()
