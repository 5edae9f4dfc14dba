"""Every kind of plugin, loaded from entry points by a real ``magnetar standalone`` subprocess:
a broker interceptor, an additional servlet, a protocol handler, an authentication provider and
an authorization provider (tests/plugins, installed into the venv), and failing plugins that
stop the start-up with the reason."""

from __future__ import annotations

import importlib
import importlib.metadata
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import jwt
import pulsar
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from magnetar.testing.standalone import StandaloneProcess

PLUGINS_DIR = Path(__file__).resolve().parents[1] / "plugins"
SECRET = b"plugin-test-secret-0123456789abcdef"
STATIC_KEY = "sekrit"
TIMEOUT_S = 10


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def example_plugins_installed() -> None:
    """pip install -e tests/plugins into this venv when its entry points are missing."""
    names = {ep.name for ep in importlib.metadata.entry_points(group="magnetar.broker_interceptors")}
    if "example-counting" not in names:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", str(PLUGINS_DIR)],
            check=True,
            timeout=300,
        )
        importlib.invalidate_caches()


@pytest.fixture(scope="module")
def plugged(example_plugins_installed, tmp_path_factory):
    base = tmp_path_factory.mktemp("plugins")
    (base / "secret.key").write_bytes(SECRET)
    line_port = free_port()
    conf = base / "standalone.conf"
    conf.write_text(
        "brokerInterceptors=example-counting\n"
        "additionalServlets=example-hello\n"
        "exampleGreeting=hi from a plugin\n"
        "messagingProtocols=example-line\n"
        f"exampleLinePort={line_port}\n"
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
        "example-static\n"
        f"tokenSecretKey=file://{base / 'secret.key'}\n"
        f"exampleStaticKey={STATIC_KEY}\n"
        "authorizationEnabled=true\n"
        "authorizationProvider=example-prefix\n"
        "superUserRoles=admin\n"
    )
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    proc.line_port = line_port  # type: ignore[attr-defined]
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {token('admin')}"}


def client_as(proc, role: str) -> pulsar.Client:
    return pulsar.Client(
        proc.broker_url,
        authentication=pulsar.AuthenticationToken(token(role)),
        operation_timeout_seconds=TIMEOUT_S,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def test_servlet_answers_on_the_broker_port(plugged) -> None:
    r = httpx.get(f"{plugged.web_url}/example/hello", headers=admin_headers(), timeout=TIMEOUT_S)
    assert r.status_code == 200, r.text
    assert r.json() == {"greeting": "hi from a plugin", "cluster": "standalone"}
    assert httpx.get(f"{plugged.web_url}/example/hello", timeout=TIMEOUT_S).status_code == 401


def test_interceptor_sees_publish_dispatch_ack_and_can_refuse(plugged) -> None:
    topic = f"persistent://public/default/alice-{uuid.uuid4().hex[:6]}"
    client = client_as(plugged, "alice")
    try:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        for i in range(3):
            producer.send(f"i{i}".encode())
        for _ in range(3):
            consumer.acknowledge(consumer.receive(timeout_millis=TIMEOUT_S * 1000))
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic, producer_name="forbidden-one")
        producer.close()
        consumer.close()
    finally:
        client.close()
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        counts = httpx.get(
            f"{plugged.web_url}/example/counts", headers=admin_headers(), timeout=TIMEOUT_S
        ).json()
        if counts.get("ack", 0) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert counts["publish"] >= 3 and counts["dispatch"] >= 3 and counts["ack"] >= 3, counts
    assert counts["command:PRODUCER"] >= 2 and counts["command:SUBSCRIBE"] >= 1, counts
    assert counts["connections"] >= 1 and counts["web"] >= 1, counts
    # on_web_request can refuse a request before authentication and routing.
    assert httpx.get(f"{plugged.web_url}/teapot", timeout=TIMEOUT_S).status_code == 418


def test_authorization_provider_decides_by_topic_prefix(plugged) -> None:
    client = client_as(plugged, "bob")
    try:
        client.create_producer(f"persistent://public/default/bob-{uuid.uuid4().hex[:6]}").close()
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(f"persistent://public/default/carol-{uuid.uuid4().hex[:6]}")
    finally:
        client.close()


def test_authentication_provider_plugin_over_websocket(plugged) -> None:
    base = plugged.web_url.replace("http://", "ws://") + "/ws/v2/producer/persistent/public/default"
    headers = {"Authorization": f"{STATIC_KEY}:dave", "X-Pulsar-Auth-Method-Name": "static"}
    with connect(f"{base}/dave-{uuid.uuid4().hex[:6]}", additional_headers=headers) as ws:
        ws.send('{"payload": "aGk="}')
        assert '"ok"' in ws.recv(timeout=TIMEOUT_S)
    bad = {"Authorization": "wrong:dave", "X-Pulsar-Auth-Method-Name": "static"}
    with pytest.raises(InvalidStatus) as info:
        connect(f"{base}/dave-x", additional_headers=bad)
    assert info.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as info:
        connect(f"{base}/erin-x", additional_headers=headers)  # dave does not own erin-*
    assert info.value.response.status_code == 403


def test_protocol_handler_speaks_its_protocol_over_broker_topics(plugged) -> None:
    topic = f"persistent://public/default/line-{uuid.uuid4().hex[:6]}"
    client = client_as(plugged, "admin")
    try:
        consumer = client.subscribe(topic, "official")
        with socket.create_connection(("127.0.0.1", plugged.line_port), timeout=TIMEOUT_S) as sock:
            f = sock.makefile("rwb")
            f.write(f"PUB {topic} hello over the line protocol\n".encode())
            f.flush()
            assert f.readline().startswith(b"OK ")
            assert consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() == b"hello over the line protocol"
            f.write(f"SUB {topic} line-sub\n".encode())
            f.flush()
            assert f.readline() == b"SUBSCRIBED\n"
            assert f.readline() == b"MSG hello over the line protocol\n"  # earliest
            producer = client.create_producer(topic)
            producer.send(b"from the official client")
            assert f.readline() == b"MSG from the official client\n"
            producer.close()
        consumer.close()
    finally:
        client.close()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("brokerInterceptors=does-not-exist\n", "brokerInterceptors: no plugin named 'does-not-exist'"),
        (
            "brokerInterceptors=example-broken\n",
            "failed to initialize: RuntimeError: example-broken cannot start",
        ),
        (
            "additionalServlets=no_such_module:Thing\n",
            "additionalServlets: cannot import 'no_such_module:Thing'",
        ),
        ("authorizationProvider=nope\n", "authorizationProvider: no plugin named 'nope'"),
        (
            "messagingProtocols=example-line\nexampleLinePort=not-a-port\n",
            "messagingProtocols: plugin 'example-line'",
        ),
    ],
    ids=["unknown", "init-raises", "bad-import", "unknown-authz", "bad-setting"],
)
def test_a_failing_plugin_stops_the_start_with_the_reason(
    example_plugins_installed, tmp_path, config, expected
) -> None:
    conf = tmp_path / "standalone.conf"
    conf.write_text(config)
    cmd = StandaloneProcess(tmp_path / "data", config_file=conf).command()
    done = subprocess.run(cmd, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode != 0, stderr
    assert expected in stderr, stderr
    assert b"magnetar ready" not in done.stdout
