"""``magnetar admin schemas ...`` against a real standalone, and what survives a restart.

A standalone subprocess; the CLI runs as a user runs it (``python -m
magnetar.cli.main admin --admin-url ...``).  Schemas live in the metadata
store, so after SIGTERM and a restart on the same data dir every version is
still there and a producer with the old schema gets its old version back; a
topic's compacted view survives too, and deleting the topic removes the
schema and the compacted ledger with it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

from magnetar.testing.cli import run_admin
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

CLI_TIMEOUT_S = 60
V1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}
V2 = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "a", "type": "string"}, {"name": "b", "type": ["null", "int"], "default": None}],
}
BAD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}


@pytest.fixture
def standalone(tmp_path: Path):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    conf = tmp_path / "standalone.conf"
    conf.write_text("brokerDeleteInactiveTopicsEnabled=false\n")
    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    proc.start()
    yield proc
    if proc.proc is not None and proc.proc.poll() is None:
        assert proc.terminate() == 0, proc.log_tail()


def cli(url: str, *argv: str, subprocess: bool = False) -> tuple[int, str, str]:
    """``magnetar admin``: in-process (magnetar.testing.cli) unless ``subprocess``."""
    done = run_admin(url, *argv, check=False, subprocess=subprocess, timeout_s=CLI_TIMEOUT_S)
    return done.returncode, done.stdout, done.stderr


def payload_file(tmp: Path, schema: dict, name: str) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"type": "AVRO", "schema": json.dumps(schema), "properties": {}}))
    return str(path)


def test_schemas_cli_and_restart(standalone: StandaloneProcess, tmp_path: Path) -> None:
    url = standalone.web_url
    topic = f"persistent://public/default/cli-{uuid.uuid4().hex[:6]}"
    code, out, err = cli(
        url, "schemas", "upload", topic, "-f", payload_file(tmp_path, V1, "v1"), subprocess=True
    )
    assert code == 0, err
    assert json.loads(out) == {"version": {"version": 0}}
    code, out, err = cli(url, "schemas", "compatibility", topic, "-f", payload_file(tmp_path, V2, "v2"))
    assert code == 0 and json.loads(out)["compatibility"] is True, (out, err)
    code, out, err = cli(url, "schemas", "compatibility", topic, "-f", payload_file(tmp_path, BAD, "bad"))
    assert code == 0 and json.loads(out)["compatibility"] is False, (out, err)
    code, out, err = cli(url, "schemas", "upload", topic, "-f", payload_file(tmp_path, BAD, "bad"))
    assert code != 0 and ("409" in err + out or "ncompatible" in err + out), (code, out, err)
    assert cli(url, "schemas", "upload", topic, "-f", payload_file(tmp_path, V2, "v2"))[0] == 0
    code, out, _ = cli(url, "schemas", "get", topic, "-a")
    assert [v["version"] for v in json.loads(out)["getSchemaResponses"]] == [0, 1]
    code, out, _ = cli(url, "schemas", "get", topic, "-v", "0")
    assert json.loads(json.loads(out)["data"]) == V1
    code, out, err = cli(url, "schemas", "get", topic, "-v", "9")
    assert code != 0, out

    # Restart: the versions are durable; the same definition maps to the same version.
    standalone.terminate()
    standalone.restart()
    with httpx.Client(base_url=standalone.web_url, timeout=15) as http:
        base = "/admin/v2/schemas/" + topic.split("://", 1)[1]
        r = http.get(base + "/schemas")
        assert [v["version"] for v in r.json()["getSchemaResponses"]] == [0, 1]
        r = http.post(base + "/version", json={"type": "AVRO", "schema": json.dumps(V1)})
        assert r.json() == {"version": 0}
    code, out, err = cli(standalone.web_url, "schemas", "delete", topic)
    assert code == 0 and json.loads(out) == {"version": 2}, (out, err)
    assert cli(standalone.web_url, "schemas", "get", topic)[0] != 0


def test_compacted_view_survives_restart_and_goes_with_topic(standalone: StandaloneProcess) -> None:
    local = f"cv-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    path = f"/admin/v2/persistent/public/default/{local}"
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(50):
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 5}")
    producer.close()
    client.close()
    with httpx.Client(base_url=standalone.web_url, timeout=15) as http:
        assert http.put(path + "/compaction").status_code == 204
        deadline = time.monotonic() + 30
        while http.get(path + "/compaction").json()["status"] != "SUCCESS":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ledger = http.get(path + "/internalStats").json()["cursors"]["__compaction"]["properties"]
        assert "CompactedTopicLedger" in ledger
    standalone.terminate()
    standalone.restart()
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = []
    for _ in range(5):
        msg = reader.read_next(10_000)
        got.append((msg.partition_key(), msg.data()))
    reader.close()
    client.close()
    assert sorted(got) == [(f"k{j}", f"v{45 + j}".encode()) for j in range(5)]
    with httpx.Client(base_url=standalone.web_url, timeout=15) as http:
        assert http.delete(path).status_code == 204
        assert http.get(path + "/compaction").status_code == 404
