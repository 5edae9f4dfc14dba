"""Process runtime supervision, and effectively-once output across a restart of the worker."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pulsar

from magnetar.testing.standalone import StandaloneProcess
from tests.functions.conftest import EXAMPLES, admin, wait_for, wait_running


def _status(sa, name):
    return httpx.get(f"{sa.web_url}/admin/v3/functions/public/default/{name}/status", timeout=10).json()


def test_process_instance_killed_is_restarted(fn_standalone, client, unique):
    name = f"proc-{unique}"
    src, dst = f"persistent://public/default/pin-{unique}", f"persistent://public/default/pout-{unique}"
    out = client.subscribe(dst, "check")
    admin(
        fn_standalone, "functions", "create", "--name", name, "--py", str(EXAMPLES / "exclamation.py"),
        "--classname", "exclamation.ExclamationFunction", "--inputs", src, "--output", dst,
        "--custom-runtime-options", '{"runtime": "process"}', "--parallelism", "2",
    )  # fmt: skip
    st = wait_running(fn_standalone, name, n=2)
    pid = wait_for(lambda: _status(fn_standalone, name)["instances"][0]["status"]["pid"], what="a pid")
    assert st["instances"][0]["status"]["runtime"] == "process"
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: (
            (s := _status(fn_standalone, name)["instances"][0]["status"])["numRestarts"] >= 1
            and s["running"]
            and s["pid"] not in (None, pid)
        ),
        what="instance 0 restarted with a new pid",
    )
    producer = client.create_producer(src)
    for i in range(10):
        producer.send(f"m{i}".encode())
    got = sorted(out.receive(20000).data().decode() for _ in range(10))
    assert got == sorted(f"m{i}!" for i in range(10))
    # stop / start one instance through the admin CLI
    admin(fn_standalone, "functions", "stop", "--name", name, "--instance-id", "1")
    wait_for(lambda: _status(fn_standalone, name)["numRunning"] == 1, what="one running")
    admin(fn_standalone, "functions", "start", "--name", name, "--instance-id", "1")
    wait_running(fn_standalone, name, n=2)


def test_effectively_once_across_worker_restart(tmp_path, unique):
    sa = StandaloneProcess(tmp_path / "eo-data")
    sa.start()
    try:
        name = f"eo-{unique}"
        src, dst = f"persistent://public/default/eoin-{unique}", f"persistent://public/default/eoout-{unique}"
        c = pulsar.Client(sa.broker_url, operation_timeout_seconds=10)
        out = c.subscribe(dst, "check")
        admin(
            sa, "functions", "create", "--name", name, "--py", str(EXAMPLES / "identity.py"),
            "--classname", "identity.identity", "--inputs", src, "--output", dst,
            "--processing-guarantees", "EFFECTIVELY_ONCE", "--subs-position", "Earliest",
        )  # fmt: skip
        wait_running(sa, name)
        # effectively-once needs the broker's deduplication: the worker turned it on for the output
        # topic only (its topic-level policy), not for the whole namespace
        topic_path = f"{sa.web_url}/admin/v2/persistent/public/default/eoout-{unique}/deduplicationEnabled"
        assert httpx.get(topic_path).json() is True
        ns = httpx.get(f"{sa.web_url}/admin/v2/namespaces/public/default/deduplication")
        assert ns.status_code == 204 or ns.json() is not True
        producer = c.create_producer(src, batching_enabled=False)
        n = 300
        for i in range(n):
            producer.send_async(f"r{i}".encode(), None)
            if i == n // 2:
                producer.flush()
                c.close()
                sa.kill()  # kill -9 the whole standalone (worker and broker) mid-stream
                sa.restart()
                c = pulsar.Client(sa.broker_url, operation_timeout_seconds=10)
                out = c.subscribe(dst, "check")
                producer = c.create_producer(src, batching_enabled=False)
        producer.flush()
        seen: list[str] = []
        deadline = time.monotonic() + 120  # the restarted worker restarts the function first
        while time.monotonic() < deadline:  # every input once, then 2 s quiet for a late duplicate
            try:
                msg = out.receive(2000)
            except pulsar.Timeout:
                if len(set(seen)) == n:
                    break
                continue
            seen.append(msg.data().decode())
            out.acknowledge(msg)
        c.close()
    finally:
        sa.terminate()
    # the function survived the restart (metadata in the store), and every input is there once
    assert len(seen) == len(set(seen)), f"duplicates: {len(seen) - len(set(seen))}"
    assert set(seen) == {f"r{i}" for i in range(n)}, f"missing {n - len(set(seen))}"
