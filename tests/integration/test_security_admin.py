"""Admin REST with authentication and authorization on, and bad input at both doors (in-process).

A standalone with token authentication, authorization and super-user ``root``;
tenants ``t1`` (admin ``a1``) and ``t2`` (admin ``a2``).  Checks: tenant admins
work on their own tenant and get 403 with a reason on the other one (and the
refused change is not applied), super-users can do everything, no credentials
is 401.  Bad input: garbage ``CONNECT`` auth data, an oversized auth blob, an
oversized HTTP header -- each is refused clearly and the broker keeps serving
a well-behaved client afterwards.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import httpx
import jwt
import pytest
import pytest_asyncio

from magnetar.protocol import client_commands as cc
from magnetar.protocol.enums import CommandType
from magnetar.protocol.frames import FrameDecoder
from magnetar.testing.standalone import broker_unavailable_reason, running_standalone

pytestmark = [
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason=str(broker_unavailable_reason())),
    pytest.mark.asyncio(loop_scope="module"),  # the loop of the module's shared standalone
]

SECRET = b"integration-security-secret-0123456789"
SUPER = "root"


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + jwt.encode({"sub": role}, SECRET, "HS256")}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def secured(tmp_path_factory):
    """One secured standalone for the module's tests (each ~1-2 s to start): every test leaves
    the tenants and namespaces as it found them (the refusal test checks their exact lists)."""
    tmp_path = tmp_path_factory.mktemp("secured")
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    props = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": f"file://{key}",
        "authorizationEnabled": "true",
        "superUserRoles": SUPER,
    }
    async with running_standalone(tmp_path / "data", props) as s:
        async with httpx.AsyncClient(base_url=s.web_url, timeout=10) as http:
            for tenant, admin in (("t1", "a1"), ("t2", "a2")):
                r = await http.put(
                    f"/admin/v2/tenants/{tenant}",
                    json={"adminRoles": [admin], "allowedClusters": ["standalone"]},
                    headers=bearer(SUPER),
                )
                assert r.status_code in (200, 204), r.text
                r = await http.put(f"/admin/v2/namespaces/{tenant}/ns", headers=bearer(SUPER))
                assert r.status_code in (200, 204), r.text
            yield s, http


def ok(r: httpx.Response) -> bool:
    return r.status_code in (200, 204)


async def test_tenant_admin_works_on_its_own_tenant(secured) -> None:
    _, http = secured
    a1 = bearer("a1")
    assert ok(await http.put("/admin/v2/namespaces/t1/ns2", headers=a1))
    assert "t1/ns2" in (await http.get("/admin/v2/namespaces/t1", headers=a1)).json()
    r = await http.post(
        "/admin/v2/namespaces/t1/ns2/retention",
        json={"retentionTimeInMinutes": 5, "retentionSizeInMB": 10},
        headers=a1,
    )
    assert ok(r), r.text
    r = await http.get("/admin/v2/namespaces/t1/ns2/retention", headers=a1)
    assert r.json()["retentionTimeInMinutes"] == 5
    assert ok(await http.post("/admin/v2/namespaces/t1/ns2/permissions/app", json=["produce"], headers=a1))
    assert ok(await http.delete("/admin/v2/namespaces/t1/ns2", headers=a1))


async def test_tenant_admin_cannot_touch_another_tenant_and_nothing_is_applied(secured) -> None:
    _, http = secured
    a1, root = bearer("a1"), bearer(SUPER)
    attempts = [
        ("PUT", "/admin/v2/namespaces/t2/stolen", None),
        ("DELETE", "/admin/v2/namespaces/t2/ns", None),
        ("GET", "/admin/v2/namespaces/t2", None),
        (
            "POST",
            "/admin/v2/namespaces/t2/ns/retention",
            {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1},
        ),
        ("POST", "/admin/v2/namespaces/t2/ns/permissions/a1", ["produce", "consume"]),
        ("PUT", "/admin/v2/persistent/t2/ns/topic-x", None),
        ("GET", "/admin/v2/persistent/t2/ns", None),
        ("PUT", "/admin/v2/tenants/t3", {"adminRoles": ["a1"], "allowedClusters": ["standalone"]}),
        ("POST", "/admin/v2/tenants/t1", {"adminRoles": ["a1", "friend"], "allowedClusters": ["standalone"]}),
        ("DELETE", "/admin/v2/tenants/t2", None),
        ("GET", "/admin/v2/tenants", None),
        ("DELETE", "/admin/v2/clusters/standalone", None),
    ]
    for method, path, body in attempts:
        r = await http.request(method, path, json=body, headers=a1)
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert "a1" in r.json()["reason"], r.text

    # none of it happened
    assert (await http.get("/admin/v2/namespaces/t2", headers=root)).json() == ["t2/ns"]
    assert (await http.get("/admin/v2/namespaces/t2/ns/retention", headers=root)).status_code in (200, 204)
    retention = await http.get("/admin/v2/namespaces/t2/ns/retention", headers=root)
    assert retention.status_code == 204 or retention.json().get("retentionTimeInMinutes") != 1
    assert "a1" not in (await http.get("/admin/v2/namespaces/t2/ns/permissions", headers=root)).json()
    assert (await http.get("/admin/v2/persistent/t2/ns", headers=root)).json() == []
    assert sorted((await http.get("/admin/v2/tenants", headers=root)).json()) == [
        "public",
        "pulsar",
        "t1",
        "t2",
    ]
    assert (await http.get("/admin/v2/tenants/t1", headers=root)).json()["adminRoles"] == ["a1"]


async def test_super_user_can_administer_every_tenant(secured) -> None:
    _, http = secured
    root = bearer(SUPER)
    for tenant in ("t1", "t2"):
        assert ok(await http.put(f"/admin/v2/namespaces/{tenant}/by-root", headers=root))
        r = await http.post(
            f"/admin/v2/namespaces/{tenant}/by-root/permissions/someone", json=["consume"], headers=root
        )
        assert ok(r), r.text
        assert ok(await http.delete(f"/admin/v2/namespaces/{tenant}/by-root", headers=root))
    assert ok(await http.put("/admin/v2/tenants/t9", json={"allowedClusters": ["standalone"]}, headers=root))
    assert ok(await http.delete("/admin/v2/tenants/t9", headers=root))


async def test_missing_and_bad_credentials_are_401(secured) -> None:
    _, http = secured
    for headers in ({}, {"Authorization": "Bearer x.y.z"}, {"Authorization": "Basic !!!"}):
        r = await http.get("/admin/v2/namespaces/t1", headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["reason"]


async def test_oversized_http_header_is_refused_and_the_server_keeps_serving(secured) -> None:
    s, http = secured
    host, port = s.web_url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET /admin/v2/tenants HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.read(200), 10)
    except ConnectionError:
        head = b""
    finally:
        writer.close()
    assert head == b"" or head.startswith(b"HTTP/1.1 4"), head  # 4xx or closed, never served
    # Through a client library: uvicorn answers 400 and closes while the client may still be
    # sending, so the client sees either the 4xx or a reset.
    try:
        r = await http.get("/admin/v2/tenants", headers={"Authorization": "Bearer " + "a" * 100_000})
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError):
        pass
    else:
        assert r.status_code in (400, 401, 431), r.text
    # A long credential within uvicorn's header limit: refused with a reason that does not echo it.
    r = await http.get("/admin/v2/tenants", headers={"Authorization": "Bearer " + "a" * 12_000})
    assert r.status_code == 401 and r.json()["reason"] and "a" * 100 not in r.text, r.text
    assert ok(await http.get("/admin/v2/tenants", headers=bearer(SUPER)))


async def _connect_reply(port: int, method: str, data: bytes) -> list[tuple[CommandType, object]]:
    """CONNECT with the given auth, then a LOOKUP; the frames the broker answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder(16 * 1024 * 1024)
    frames: list[tuple[CommandType, object]] = []
    try:
        writer.write(cc.connect(auth_method_name=method, auth_data=data))
        writer.write(cc.lookup("persistent://public/default/x", 1))
        await writer.drain()
        async with asyncio.timeout(10):
            while len(frames) < 2:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                decoder.feed(chunk)
                while (f := decoder.next_frame()) is not None:
                    frames.append((f.type, f.command))
    finally:
        writer.close()
    return frames


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("token", os.urandom(300)),
        ("token", b"\xff\xfe" * 10),
        ("token", b"a" * (2 * 1024 * 1024)),
        ("x" * 5000, b"whatever"),
    ],
    ids=["random-bytes", "bad-utf8", "oversized", "long-unknown-method"],
)
async def test_garbage_connect_auth_data_is_refused_and_others_are_served(secured, method, data) -> None:
    s, _http = secured
    port = s.broker_service.broker_port
    frames = await _connect_reply(port, method, data)
    assert frames, "the broker answered nothing"
    types = [t for t, _ in frames]
    # Either Java's ERROR reply, or CONNECTED followed by a refused lookup (the client fails fast).
    if types[0] == CommandType.ERROR:
        assert frames[0][1].message
    else:
        assert types[0] == CommandType.CONNECTED, types
        assert len(frames) == 2 and types[1] == CommandType.LOOKUP_RESPONSE, types
        resp = frames[1][1]
        assert resp.error == 3 and resp.message  # ServerError.AuthenticationError
        assert "x" * 200 not in resp.message  # a bounded message, no echo of the input
    good = await _connect_reply(
        port, "token", bearer(SUPER)["Authorization"].removeprefix("Bearer ").encode()
    )
    assert [t for t, _ in good] == [CommandType.CONNECTED, CommandType.LOOKUP_RESPONSE]
    assert not good[1][1].HasField("error")


async def test_a_connection_refused_for_bad_auth_does_not_disturb_a_running_producer(secured) -> None:
    s, _ = secured
    pulsar = pytest.importorskip("pulsar")
    topic = f"persistent://t1/ns/keep-{uuid.uuid4().hex[:6]}"
    token = bearer(SUPER)["Authorization"].removeprefix("Bearer ")

    def run() -> list[str]:
        c = pulsar.Client(
            s.broker_url, authentication=pulsar.AuthenticationToken(token), operation_timeout_seconds=10
        )
        try:
            consumer = c.subscribe(topic, "s")
            producer = c.create_producer(topic)
            producer.send(b"before")
            bad = pulsar.Client(
                s.broker_url,
                authentication=pulsar.AuthenticationToken("garbage"),
                operation_timeout_seconds=10,
            )
            try:
                bad.create_producer(topic)
            except pulsar.AuthenticationError:
                pass
            finally:
                bad.close()
            producer.send(b"after")
            return [consumer.receive(10_000).data().decode() for _ in range(2)]
        finally:
            c.close()

    assert await asyncio.to_thread(run) == ["before", "after"]


async def test_health_check_uses_the_broker_client_credentials(tmp_path) -> None:
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    root_token = bearer(SUPER)["Authorization"].removeprefix("Bearer ")
    props = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": f"file://{key}",
        "authorizationEnabled": "true",
        "superUserRoles": SUPER,
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{root_token}",
    }
    async with running_standalone(tmp_path / "data", props) as s:
        async with httpx.AsyncClient(base_url=s.web_url, timeout=30) as http:
            r = await http.get("/admin/v2/brokers/health", headers=bearer(SUPER))
            assert r.status_code == 200, r.text
            r = await http.get("/admin/v2/brokers/health", headers=bearer("a1"))
            assert r.status_code == 403  # super-user only, as in Pulsar


async def test_health_check_without_broker_client_credentials_says_why(secured) -> None:
    _, http = secured
    r = await http.get("/admin/v2/brokers/health", headers=bearer(SUPER))
    assert r.status_code == 500
    assert "authentication" in r.json()["reason"].lower() or "anonymous" in r.json()["reason"]
