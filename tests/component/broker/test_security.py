"""broker.auth wired into connections: token authentication and authorization, official client."""

from __future__ import annotations

import asyncio

import jwt
import pulsar
import pytest
from broker_harness import running_broker

pytestmark = pytest.mark.compat

SECRET = b"0123456789abcdef0123456789abcdef"


def _token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


@pytest.fixture
async def secured(tmp_path):
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    async with running_broker(
        authenticationEnabled="true",
        authenticationProviders="org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        tokenSecretKey=f"file://{key}",
        authorizationEnabled="true",
        superUserRoles="admin",
    ) as b:
        yield b


def _attempt(url: str, token: str) -> str:
    c = pulsar.Client(url, authentication=pulsar.AuthenticationToken(token), operation_timeout_seconds=10)
    try:
        p = c.create_producer("t-sec")
        p.send(b"x")
        consumer = c.subscribe("t-sec", "s", initial_position=pulsar.InitialPosition.Earliest)
        return consumer.receive(5000).data().decode()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    finally:
        c.close()


async def test_superuser_token_produces_and_consumes(secured) -> None:
    assert await asyncio.to_thread(_attempt, secured.url, _token("admin")) == "x"


async def test_bad_token_fails_fast_with_an_authentication_error(secured) -> None:
    result = await asyncio.to_thread(_attempt, secured.url, "not-a-jwt")
    assert result not in ("x", "Timeout")
    assert "Authentication" in result


async def test_role_without_permission_is_not_authorized(secured) -> None:
    result = await asyncio.to_thread(_attempt, secured.url, _token("nobody"))
    assert "Authorization" in result


async def test_tls_listener_serves_pulsar_ssl(tmp_path) -> None:
    from magnetar.testing.certs import make_test_pki

    pki = make_test_pki(tmp_path)
    async with running_broker(
        brokerServicePortTls="0",
        tlsCertificateFilePath=pki.server.cert_file,
        tlsKeyFilePath=pki.server.key_file,
    ) as b:
        await b.service.serve_tls("127.0.0.1", 0)
        url = f"pulsar+ssl://localhost:{b.service.broker_port_tls}"

        def run() -> bytes:
            c = pulsar.Client(url, tls_trust_certs_file_path=pki.ca_cert_file, operation_timeout_seconds=10)
            try:
                consumer = c.subscribe("t-tls", "s")
                c.create_producer("t-tls").send(b"over tls")
                return consumer.receive(5000).data()
            finally:
                c.close()

        assert await asyncio.to_thread(run) == b"over tls"
