"""``magnetar proxy`` in front of a real ``magnetar standalone``, driven by the official client.

Two setups, each a module fixture of real processes: an open one (a proxy in front of
the directory's shared standalone; produce and consume through the proxy's URL, a
partitioned topic, admin REST through the proxy's HTTP port) and a secured one (token
authentication on the proxy and on the broker, authorization on the broker, the proxy's
own role in ``proxyRoles``): a client's role reaches the broker's authorization through
the proxy (alice, granted, may produce; bob, not granted, is refused), a bad token is
refused by the proxy, and a non-proxy role that claims an ``original_principal`` is
refused by the broker.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
import uuid

import jwt
import pytest

from magnetar.testing.cluster import ProxyProcess
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]

SECRET = b"clusterops-proxy-secret-0123456789abcdef"
TIMEOUT_S = 10
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TOKEN_CLIENT = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


def client(url: str, **kw) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=TIMEOUT_S, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), **kw
    )


def http(method: str, url: str, body=None, role: str | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if role is not None:
        req.add_header("Authorization", f"Bearer {token(role)}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture(scope="module")
def open_proxy(standalone, tmp_path_factory):
    """The proxy in front of the directory's shared default standalone (tests/compat/conftest.py)."""
    sa = standalone
    proxy = ProxyProcess(
        tmp_path_factory.mktemp("proxy-open") / "proxy",
        {"brokerServiceURL": sa.broker_url, "brokerWebServiceURL": sa.web_url},
    )
    try:
        proxy.start()
        yield sa, proxy
    finally:
        code = proxy.terminate()
    assert code == 0, proxy.log()


def test_produce_consume_through_proxy(open_proxy):
    sa, proxy = open_proxy
    assert proxy.service_url != sa.broker_url
    c = client(proxy.service_url)
    try:
        topic = f"persistent://public/default/proxy-{uuid.uuid4().hex[:8]}"
        consumer = c.subscribe(topic, "s")
        producer = c.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=2)
        for i in range(300):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        got = [consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() for _ in range(300)]
        assert got == [f"m{i}".encode() for i in range(300)]
    finally:
        c.close()
    status, stats = http("GET", proxy.web_url + "/proxy-stats")
    assert status == 200
    counters = json.loads(stats)
    # the data went through the proxy: tunnelled bytes both ways, lookups answered by it
    assert counters["tunnels"] >= 1 and counters["lookups"] >= 1, counters
    assert counters["bytes_to_brokers"] > 300 and counters["bytes_to_clients"] > 300, counters
    status, text = http("GET", proxy.web_url + "/metrics")
    assert status == 200 and 'pulsar_proxy_new_connections{cluster="standalone"}' in text
    tunnelled = next(line for line in text.splitlines() if line.startswith("pulsar_proxy_binary_bytes{"))
    assert float(tunnelled.rsplit(" ", 1)[1]) > 600


def test_partitioned_topic_and_admin_through_proxy(open_proxy):
    _, proxy = open_proxy
    name = f"proxy-part-{uuid.uuid4().hex[:8]}"
    # admin REST through the proxy's web port
    status, body = http("PUT", f"{proxy.web_url}/admin/v2/persistent/public/default/{name}/partitions", 3)
    assert status in (200, 204), body
    status, body = http("GET", f"{proxy.web_url}/admin/v2/persistent/public/default/{name}/partitions")
    assert status == 200 and json.loads(body)["partitions"] == 3, body
    status, body = http("GET", f"{proxy.web_url}/admin/v2/clusters")
    assert status == 200 and "standalone" in body
    status, body = http("GET", f"{proxy.web_url}/admin/v2/namespaces/no-such-tenant")
    assert status in (403, 404), (status, body)  # the broker's answer, relayed unchanged
    c = client(proxy.service_url)
    try:
        topic = f"persistent://public/default/{name}"
        assert len(c.get_topic_partitions(topic)) == 3
        consumer = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(f"p{i}".encode(), partition_key=str(i))
        got = sorted(consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() for _ in range(30))
        assert got == sorted(f"p{i}".encode() for i in range(30))
    finally:
        c.close()


def test_proxy_refuses_unknown_tunnel_target(open_proxy):
    """A CONNECT asking to be tunnelled to a host that is no broker of ours gets ERROR (no open relay)."""
    from magnetar.protocol import client_commands
    from magnetar.protocol.frames import decode_frame_body

    _, proxy = open_proxy
    host, port = proxy.service_url[len("pulsar://") :].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as s:
        s.sendall(client_commands.connect(proxy_to_broker_url="10.255.255.1:22"))
        frame = _read_frame(s, decode_frame_body)
    assert frame.type.name == "ERROR" and "does not forward" in frame.command.message


def _read_frame(s: socket.socket, decode):
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    size = int.from_bytes(exact(4), "big")
    return decode(exact(size))


# ---------------------------------------------------------------------- secured
@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    base = tmp_path_factory.mktemp("proxy-secured")
    key = base / "secret.key"
    key.write_bytes(SECRET)
    common = [
        "authenticationEnabled=true",
        f"authenticationProviders={TOKEN_PROVIDER}",
        f"tokenSecretKey=file://{key}",
        f"brokerClientAuthenticationPlugin={TOKEN_CLIENT}",
    ]
    conf = base / "standalone.conf"
    conf.write_text(
        "\n".join(
            [
                *common,
                f"brokerClientAuthenticationParameters=token:{token('admin')}",
                "authorizationEnabled=true",
                "superUserRoles=admin,proxy",
                "proxyRoles=proxy",
                "",
            ]
        )
    )
    sa = StandaloneProcess(base / "standalone", config_file=conf)
    sa.start()
    props = dict(line.split("=", 1) for line in common)
    props.update(
        {
            "brokerServiceURL": sa.broker_url,
            "brokerWebServiceURL": sa.web_url,
            "brokerClientAuthenticationParameters": f"token:{token('proxy')}",
        }
    )
    proxy = ProxyProcess(base / "proxy", props)
    try:
        proxy.start()
        status, body = http(
            "POST",
            f"{sa.web_url}/admin/v2/namespaces/public/default/permissions/alice",
            ["produce", "consume"],
            role="admin",
        )
        assert status in (200, 204), body
        yield sa, proxy
    finally:
        code = proxy.terminate()
        sa.terminate()
    assert code == 0, proxy.log()


def test_client_role_reaches_broker_authorization(secured):
    _, proxy = secured
    topic = f"persistent://public/default/auth-{uuid.uuid4().hex[:8]}"
    alice = client(proxy.service_url, authentication=pulsar.AuthenticationToken(token("alice")))
    try:
        producer = alice.create_producer(topic)
        consumer = alice.subscribe(topic, "s")
        producer.send(b"from alice")
        assert consumer.receive(timeout_millis=TIMEOUT_S * 1000).data() == b"from alice"
    finally:
        alice.close()
    # bob authenticates fine at the proxy, but the broker checks bob's grants, not the proxy's
    bob = client(proxy.service_url, authentication=pulsar.AuthenticationToken(token("bob")))
    try:
        with pytest.raises(pulsar.AuthorizationError):
            bob.create_producer(topic)
    finally:
        bob.close()


def test_bad_token_refused_by_proxy(secured):
    _, proxy = secured
    forged = jwt.encode({"sub": "admin"}, b"not-the-secret-0123456789abcdef-xx", "HS256")
    for auth in (pulsar.AuthenticationToken(forged), None):
        c = client(proxy.service_url, **({"authentication": auth} if auth else {}))
        try:
            with pytest.raises(pulsar.AuthenticationError):
                c.create_producer(f"persistent://public/default/bad-{uuid.uuid4().hex[:6]}")
        finally:
            c.close()
    status, _ = http("GET", f"{proxy.web_url}/admin/v2/clusters")
    assert status == 401
    status, body = http("GET", f"{proxy.web_url}/admin/v2/clusters", role="admin")
    assert status == 200, body


def test_broker_refuses_original_principal_from_non_proxy_role(secured):
    """Only a role in proxyRoles may speak for another: bob claiming to be admin gets nothing."""
    from magnetar.protocol import client_commands
    from magnetar.protocol.frames import decode_frame_body

    sa, _ = secured
    host, port = sa.broker_url[len("pulsar://") :].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as s:
        s.sendall(
            client_commands.connect(
                auth_method_name="token", auth_data=token("bob").encode(), original_principal="admin"
            )
        )
        assert _read_frame(s, decode_frame_body).type.name == "CONNECTED"
        s.sendall(client_commands.lookup("persistent://public/default/x", 1))
        answer = _read_frame(s, decode_frame_body)
    assert answer.type.name == "LOOKUP_RESPONSE"
    assert answer.command.error == 3 and "proxyRoles" in answer.command.message  # AuthenticationError


def test_refused_credential_fails_every_request_with_authentication_error(secured):
    from magnetar.protocol import client_commands
    from magnetar.protocol.frames import decode_frame_body

    _, proxy = secured
    host, port = proxy.service_url[len("pulsar://") :].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as s:
        s.sendall(client_commands.connect(auth_method_name="token", auth_data=b"garbage"))
        assert _read_frame(s, decode_frame_body).type.name == "CONNECTED"
        s.sendall(client_commands.producer("persistent://public/default/x", 1, 7))
        answer = _read_frame(s, decode_frame_body)
        s.sendall(client_commands.partitioned_metadata("persistent://public/default/x", 8))
        meta = _read_frame(s, decode_frame_body)
    assert answer.type.name == "ERROR" and answer.command.error == 3 and answer.command.request_id == 7
    assert meta.command.error == 3 and meta.command.request_id == 8
