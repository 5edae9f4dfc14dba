"""Functions on a standalone with authenticationEnabled + authorizationEnabled and tokens.

The worker's instances present ``brokerClientAuthenticationPlugin/Parameters`` (the
super-user token) to the broker and to the state API; ``magnetar admin functions``
sends the ``--auth-plugin/--auth-params`` credentials like every admin command.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from subprocess import CompletedProcess

import httpx
import jwt
import pytest

from magnetar.testing.cli import run_admin
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "functions"

SECRET = b"functions-auth-secret-0123456789abcdef"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("fnauth")
    (base / "secret.key").write_bytes(SECRET)
    conf = base / "standalone.conf"
    conf.write_text(
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
        f"tokenSecretKey=file://{base / 'secret.key'}\n"
        "authorizationEnabled=true\nsuperUserRoles=admin\n"
        f"brokerClientAuthenticationPlugin={TOKEN_PLUGIN}\n"
        f"brokerClientAuthenticationParameters=token:{_token('admin')}\n"
    )
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    proc.terminate()


def _admin(proc, token: str | None, *args: str, subprocess: bool = False) -> CompletedProcess[str]:
    auth = ["--auth-plugin", TOKEN_PLUGIN, "--auth-params", f"token:{token}"] if token else []
    return run_admin(proc.web_url, *auth, *args, check=False, subprocess=subprocess)


@pytest.mark.parametrize("runtime", ["process", "thread"])
def test_functions_with_token_auth(secured, runtime):
    u = uuid.uuid4().hex[:8]
    admin_token = _token("admin")
    name, src, dst = (
        f"excl-{u}",
        f"persistent://public/default/ain-{u}",
        f"persistent://public/default/aout-{u}",
    )
    create = (
        "functions", "create", "--name", name, "--py", str(EXAMPLES / "exclamation.py"),
        "--classname", "exclamation.ExclamationFunction", "--inputs", src, "--output", dst,
        "--custom-runtime-options", f'{{"runtime": "{runtime}"}}',
    )  # fmt: skip
    refused = _admin(secured, None, *create, subprocess=True)  # the entry point as a user runs it
    assert refused.returncode == 1 and "401" in refused.stderr, refused.stderr
    r = _admin(secured, admin_token, *create)
    assert r.returncode == 0, r.stderr
    headers = {"Authorization": f"Bearer {admin_token}"}

    def running():
        got = httpx.get(
            f"{secured.web_url}/admin/v3/functions/public/default/{name}/status", headers=headers, timeout=10
        )
        return got.status_code == 200 and got.json()["numRunning"] == 1

    wait_for(running, 30, "the instance running")
    client = pulsar.Client(
        secured.broker_url,
        authentication=pulsar.AuthenticationToken(admin_token),
        operation_timeout_seconds=10,
    )
    try:
        out = client.subscribe(dst, "check")
        producer = client.create_producer(src)
        for i in range(10):
            producer.send(f"hi-{i}".encode())
        got = []
        for _ in range(10):
            msg = out.receive(20000)
            got.append(msg.data().decode())
            out.acknowledge(msg)
    finally:
        client.close()
    assert sorted(got) == sorted(f"hi-{i}!" for i in range(10))
    status = _admin(secured, admin_token, "-o", "json", "functions", "status", "--name", name)
    assert status.returncode == 0 and '"numRunning": 1' in status.stdout, status.stdout + status.stderr
    assert _admin(secured, admin_token, "functions", "delete", "--name", name).returncode == 0


def test_counters_with_token_auth(secured):
    """incr_counter goes through the worker's state API with the instance's credentials."""
    u = uuid.uuid4().hex[:8]
    admin_token = _token("admin")
    name, src = f"wc-{u}", f"persistent://public/default/awords-{u}"
    r = _admin(
        secured, admin_token, "functions", "create", "--name", name, "--py", str(EXAMPLES / "word_count.py"),
        "--classname", "word_count.WordCountFunction", "--inputs", src,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    client = pulsar.Client(
        secured.broker_url,
        authentication=pulsar.AuthenticationToken(admin_token),
        operation_timeout_seconds=10,
    )
    try:
        wait_for(
            lambda: (
                '"numRunning": 1'
                in _admin(secured, admin_token, "-o", "json", "functions", "status", "--name", name).stdout
            ),
            30,
            "running",
        )
        producer = client.create_producer(src)
        for line in ["a b a", "a"]:
            producer.send(line.encode())
    finally:
        client.close()

    def count_a():
        q = _admin(secured, admin_token, "-o", "json", "functions", "querystate", "--name", name, "-k", "a")
        return '"numberValue": 3' in q.stdout

    wait_for(count_a, 30, "counter a = 3")
    assert _admin(secured, None, "functions", "querystate", "--name", name, "-k", "a").returncode == 1
