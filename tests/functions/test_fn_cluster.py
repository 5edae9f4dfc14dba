"""``magnetar functions-worker``: three worker processes over a real ZooKeeper, one leader-elected
scheduler; a function's instances spread over the workers; kill -9 of the leader worker moves
its instances to the others (and leadership to another worker), with no input lost."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 -- fixture

pulsar = pytest.importorskip("pulsar")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "functions"
READY = re.compile(r"^magnetar functions-worker ready: (\S+) (http://\S+)\s*$")


class WorkerProcess:
    def __init__(self, conf: Path, log: Path) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "magnetar.cli.main", "functions-worker", "--config", str(conf)],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        self._found: list[str] = []
        self._done = threading.Event()

        def drain() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                m = READY.match(raw.decode(errors="replace"))
                if m and not self._found:
                    self._found.append(m.group(2))
                    self._done.set()
            self._done.set()

        threading.Thread(target=drain, daemon=True).start()
        self.url = ""

    def wait_ready(self, timeout_s: float = 60) -> WorkerProcess:
        """Until its ready line (spawned workers start together; each is waited for here)."""
        if not self._done.wait(timeout_s) or not self._found:
            self.proc.kill()
            raise AssertionError(f"worker did not start: {self.log.read_text()[-2000:]}")
        self.url = self._found[0]
        return self

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = StandaloneProcess(
        tmp_path_factory.mktemp("fncluster") / "data", extra_args=["--no-functions-worker"]
    )
    proc.start()
    yield proc
    proc.terminate()


def _status(url: str, name: str) -> dict | None:
    try:
        r = httpx.get(f"{url}/admin/v3/functions/public/default/{name}/status", timeout=10)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def test_workers_schedule_and_reschedule_after_kill(broker, zookeeper_server, tmp_path):
    u = uuid.uuid4().hex[:8]
    zk = f"{zookeeper_server.url}/fn-cluster-{u}"
    workers: dict[str, WorkerProcess] = {}
    for wid in ("w1", "w2", "w3"):
        conf = tmp_path / f"{wid}.yml"
        conf.write_text(
            f"workerId: {wid}\nworkerHostname: 127.0.0.1\nworkerPort: 0\n"
            f"pulsarServiceUrl: {broker.broker_url}\npulsarWebServiceUrl: {broker.web_url}\n"
            f"configurationMetadataStoreUrl: {zk}\nmetadataStoreSessionTimeoutMillis: 4000\n"
            f"downloadDirectory: {tmp_path / wid}\nnumFunctionPackageReplicas: 1\n"
            "functionRuntimeFactoryClassName: org.apache.pulsar.functions.runtime.process.ProcessRuntimeFactory\n"
        )
        workers[wid] = WorkerProcess(conf, tmp_path / f"{wid}.log")  # the three start together
    try:
        for w in workers.values():
            w.wait_ready()
        name = f"excl-{u}"
        src, dst = f"persistent://public/default/cin-{u}", f"persistent://public/default/cout-{u}"
        r = subprocess.run(
            [sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", workers["w2"].url,
             "functions", "create", "--name", name, "--py", str(EXAMPLES / "exclamation.py"),
             "--classname", "exclamation.ExclamationFunction", "--inputs", src, "--output", dst,
             "--parallelism", "3"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr

        def spread():
            st = _status(workers["w3"].url, name)  # any worker answers, asking the others
            if not st or st["numRunning"] != 3:
                return None
            return {i["instanceId"]: i["status"]["workerId"] for i in st["instances"]}

        placed = wait_for(spread, 60, "3 instances running")
        assert sorted(placed.values()) == ["w1", "w2", "w3"], placed

        client = pulsar.Client(broker.broker_url, operation_timeout_seconds=10)
        out = client.subscribe(dst, "check")
        producer = client.create_producer(src, batching_enabled=False)
        for i in range(30):
            producer.send(f"a{i}".encode())
        got = set()
        while len(got) < 30:
            msg = out.receive(20000)
            got.add(msg.data().decode())
            out.acknowledge(msg)
        assert got == {f"a{i}!" for i in range(30)}

        leader = httpx.get(f"{workers['w1'].url}/admin/v2/worker/cluster/leader", timeout=10)
        victim = leader.json()["workerId"] if leader.status_code == 200 else "w1"
        os.kill(workers[victim].proc.pid, signal.SIGKILL)
        workers[victim].proc.wait(10)
        alive = [w for w in workers if w != victim]

        def moved():
            placed = spread_from(alive[0])
            return placed if placed and victim not in placed.values() else None

        def spread_from(wid):
            st = _status(workers[wid].url, name)
            if not st or st["numRunning"] != 3:
                return None
            return {i["instanceId"]: i["status"]["workerId"] for i in st["instances"]}

        placed = wait_for(moved, 60, f"instances of {victim} rescheduled")
        assert set(placed.values()) <= set(alive) and len(placed) == 3
        new_leader = httpx.get(f"{workers[alive[0]].url}/admin/v2/worker/cluster/leader", timeout=10).json()
        assert new_leader["workerId"] in alive
        for i in range(30, 60):
            producer.send(f"a{i}".encode())
        while len(got) < 60:
            msg = out.receive(30000)
            got.add(msg.data().decode())
            out.acknowledge(msg)
        assert got == {f"a{i}!" for i in range(60)}
        client.close()
    finally:
        for w in workers.values():
            w.stop()


def test_worker_rest_authenticates_with_the_broker_keys(broker, zookeeper_server, tmp_path):
    """authenticationEnabled/authorizationEnabled in functions_worker.yml: tokens as on the broker."""
    import jwt

    secret = b"worker-auth-secret-0123456789abcdef"
    (tmp_path / "secret.key").write_bytes(secret)
    admin_token = jwt.encode({"sub": "admin"}, secret, "HS256")
    u = uuid.uuid4().hex[:8]
    conf = tmp_path / "wa.yml"
    conf.write_text(
        f"workerId: wa\nworkerHostname: 127.0.0.1\nworkerPort: 0\n"
        f"pulsarServiceUrl: {broker.broker_url}\npulsarWebServiceUrl: {broker.web_url}\n"
        f"configurationMetadataStoreUrl: {zookeeper_server.url}/fn-auth-{u}\n"
        f"downloadDirectory: {tmp_path / 'wa'}\n"
        "authenticationEnabled: true\nauthorizationEnabled: true\nsuperUserRoles: [admin]\n"
        "authenticationProviders: [org.apache.pulsar.broker.authentication.AuthenticationProviderToken]\n"
        f"tokenSecretKey: file://{tmp_path / 'secret.key'}\n"
    )
    worker = WorkerProcess(conf, tmp_path / "wa.log").wait_ready()
    try:
        url = f"{worker.url}/admin/v2/worker/cluster"
        assert httpx.get(url, timeout=10).status_code == 401
        bad = jwt.encode({"sub": "nobody"}, secret, "HS256")
        assert httpx.get(url, headers={"Authorization": f"Bearer {bad}"}, timeout=10).status_code == 403
        got = httpx.get(url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=10)
        assert got.status_code == 200 and [w["workerId"] for w in got.json()] == ["wa"]
        name = f"excl-{u}"
        create = [
            sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", worker.url,
            "functions", "create", "--name", name, "--py", str(EXAMPLES / "exclamation.py"),
            "--classname", "exclamation.ExclamationFunction", "--inputs", f"persistent://public/default/wa-{u}",
        ]  # fmt: skip
        refused = subprocess.run(create, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "401" in refused.stderr
        auth = ["--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                "--auth-params", f"token:{admin_token}"]  # fmt: skip
        ok = subprocess.run([*create[:6], *auth, *create[6:]], capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
    finally:
        worker.stop()
