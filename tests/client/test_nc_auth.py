"""magnetar.client security against a secured standalone: token (static, supplier), basic, TLS.

One standalone for the module with token, basic and TLS-certificate providers,
authorization with super-users, and a TLS listener using a CA-signed
``localhost`` certificate generated per run (as tests/compat/test_security_auth.py).
"""

from __future__ import annotations

import socket
import uuid

import bcrypt
import jwt
import pytest

from magnetar.client import (
    AuthenticationBasic,
    AuthenticationError,
    AuthenticationTLS,
    AuthenticationToken,
    AuthorizationError,
    Client,
    ConnectError,
)
from magnetar.testing.certs import make_test_pki
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

SECRET = b"native-client-secret-0123456789abcdef"
SUPER = "admin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token(role: str, **claims) -> str:
    return jwt.encode({"sub": role, **claims}, SECRET, "HS256")


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("ncsecurity")
    pki = make_test_pki(base / "pki", (SUPER, "bob"))
    (base / "secret.key").write_bytes(SECRET)
    carol = bcrypt.hashpw(b"carol-pw", bcrypt.gensalt(rounds=4)).decode()
    (base / "htpasswd").write_text(f"carol:{carol}\n")
    tls_port = free_port()
    conf = base / "standalone.conf"
    conf.write_text(
        "\n".join(
            [
                "authenticationEnabled=true",
                "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
                "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic,"
                "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
                f"tokenSecretKey=file://{base / 'secret.key'}",
                f"basicAuthConf={base / 'htpasswd'}",
                "authorizationEnabled=true",
                f"superUserRoles={SUPER},carol",
                f"tlsCertificateFilePath={pki.server.cert_file}",
                f"tlsKeyFilePath={pki.server.key_file}",
                f"tlsTrustCertsFilePath={pki.ca_cert_file}",
                f"brokerServicePortTls={tls_port}",
                "",
            ]
        )
    )
    proc = StandaloneProcess(
        base / "data", config_file=conf, extra_args=["--advertised-address", "localhost"]
    )
    proc.start()
    proc.tls_url = f"pulsar+ssl://localhost:{tls_port}"
    proc.pki = pki
    yield proc
    assert proc.terminate() == 0


async def round_trip(url: str, **kw) -> str:
    client = Client(url, operation_timeout_seconds=10, **kw)
    topic = f"persistent://public/default/auth-{uuid.uuid4().hex[:8]}"
    try:
        consumer = await client.subscribe(topic, "s")
        producer = await client.create_producer(topic)
        await producer.send(b"ok")
        return (await consumer.receive(5000)).data().decode()
    except Exception as exc:
        return type(exc).__name__
    finally:
        await client.close()


async def test_token_static_and_supplier(secured):
    assert await round_trip(secured.broker_url, authentication=AuthenticationToken(token(SUPER))) == "ok"
    calls = []

    async def supplier() -> str:
        calls.append(1)
        return token(SUPER)

    assert await round_trip(secured.broker_url, authentication=AuthenticationToken(supplier)) == "ok"
    assert calls
    bad = AuthenticationToken(token(SUPER, exp=1))
    assert await round_trip(secured.broker_url, authentication=bad) == AuthenticationError.__name__
    assert await round_trip(secured.broker_url) == AuthenticationError.__name__  # no anonymous role here


async def test_basic(secured):
    assert (
        await round_trip(secured.broker_url, authentication=AuthenticationBasic("carol", "carol-pw")) == "ok"
    )
    wrong = AuthenticationBasic("carol", "nope")
    assert await round_trip(secured.broker_url, authentication=wrong) == AuthenticationError.__name__


async def test_tls_transport_and_client_certificates(secured, tmp_path):
    pki = secured.pki
    ok = await round_trip(
        secured.tls_url,
        authentication=AuthenticationToken(token(SUPER)),
        tls_trust_certs_file_path=pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    assert ok == "ok"
    admin = pki.clients[SUPER]
    ok = await round_trip(
        secured.tls_url,
        authentication=AuthenticationTLS(admin.cert_file, admin.key_file),
        tls_trust_certs_file_path=pki.ca_cert_file,
    )
    assert ok == "ok"
    bob = pki.clients["bob"]
    denied = await round_trip(
        secured.tls_url,
        authentication=AuthenticationTLS(bob.cert_file, bob.key_file),
        tls_trust_certs_file_path=pki.ca_cert_file,
    )
    assert denied == AuthorizationError.__name__
    other = make_test_pki(tmp_path / "other", ())
    untrusted = await round_trip(
        secured.tls_url,
        authentication=AuthenticationToken(token(SUPER)),
        tls_trust_certs_file_path=other.ca_cert_file,
    )
    assert untrusted == ConnectError.__name__
