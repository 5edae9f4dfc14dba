"""Test PKI + SSL contexts: real TLS handshakes on loopback, hostname checks, client-cert CN as role."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from cryptography import x509

from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthConfigError
from magnetar.broker.auth.providers import TlsProvider
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.tls import (
    client_ssl_context,
    peer_certificate,
    peer_common_name,
    server_ssl_context,
    server_ssl_context_from_config,
)
from magnetar.testing.certs import TestPki, make_test_pki

TIMEOUT_S = 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:  # type: ignore[no-untyped-def]
    return make_test_pki(tmp_path_factory.mktemp("pki"), client_roles=("app-1", "admin"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory) -> TestPki:  # type: ignore[no-untyped-def]
    return make_test_pki(tmp_path_factory.mktemp("other"), client_roles=("intruder",))


@asynccontextmanager
async def tls_server(ctx: ssl.SSLContext) -> AsyncIterator[tuple[int, list[object]]]:
    """An echo-the-peer server: records what the handshake told it about the client."""
    seen: list[object] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        seen.append((writer.get_extra_info("peercert"), peer_certificate(ssl_object)))
        cn = peer_common_name(peer_certificate(ssl_object)) or "-"
        writer.write(cn.encode() + b"\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, seen
    finally:
        server.close()
        await server.wait_closed()


async def client_roundtrip(port: int, ctx: ssl.SSLContext, server_hostname: str = "localhost") -> bytes:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=server_hostname), TIMEOUT_S
    )
    try:
        return await asyncio.wait_for(reader.readline(), TIMEOUT_S)
    finally:
        writer.close()


def test_pki_files(pki: TestPki) -> None:
    server = x509.load_pem_x509_certificate(open(pki.server.cert_file, "rb").read())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert "127.0.0.1" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    assert peer_common_name(server) == "localhost"
    assert set(pki.clients) == {"app-1", "admin"}
    import os
    import stat

    assert stat.S_IMODE(os.stat(pki.server.key_file).st_mode) == 0o600


async def test_handshake_with_hostname_check(pki: TestPki) -> None:
    ctx = server_ssl_context(pki.server.cert_file, pki.server.key_file)
    async with tls_server(ctx) as (port, seen):
        line = await client_roundtrip(port, client_ssl_context(pki.ca_cert_file))
        assert line == b"-\n"  # no client certificate was asked for
    assert seen == [(None, None)]


async def test_wrong_hostname_and_untrusted_ca_fail(pki: TestPki, other_pki: TestPki) -> None:
    ctx = server_ssl_context(pki.server.cert_file, pki.server.key_file)
    async with tls_server(ctx) as (port, _):
        with pytest.raises(ssl.SSLCertVerificationError, match="[Hh]ostname"):
            await client_roundtrip(port, client_ssl_context(pki.ca_cert_file), server_hostname="example.com")
        with pytest.raises(ssl.SSLCertVerificationError):
            await client_roundtrip(port, client_ssl_context(other_pki.ca_cert_file))
        # the 127.0.0.1 SAN lets a client that checks the IP in through
        assert await client_roundtrip(port, client_ssl_context(pki.ca_cert_file), "127.0.0.1") == b"-\n"


async def test_required_client_cert_gives_the_cn_as_role(pki: TestPki) -> None:
    cfg = AuthConfig(
        authentication_enabled=True,
        authentication_providers=("tls",),
        tls_certificate_file_path=pki.server.cert_file,
        tls_key_file_path=pki.server.key_file,
        tls_trust_certs_file_path=pki.ca_cert_file,
        tls_require_trusted_client_cert_on_connect=True,
        broker_service_port_tls=0,
    )
    client = pki.clients["app-1"]
    ctx = client_ssl_context(pki.ca_cert_file, cert_file=client.cert_file, key_file=client.key_file)
    async with tls_server(server_ssl_context_from_config(cfg)) as (port, seen):
        assert await client_roundtrip(port, ctx) == b"app-1\n"
    peercert_dict, der = seen[0]  # type: ignore[misc]
    assert peer_common_name(peercert_dict) == "app-1"  # type: ignore[arg-type]
    svc = AuthenticationService(cfg, {"tls": TlsProvider()})
    for form in (peercert_dict, der):
        result = await svc.authenticate("tls", b"", form)  # type: ignore[arg-type]
        assert (result.role, result.method) == ("app-1", "tls")
    await svc.aclose()


async def test_required_client_cert_refuses_clients_without_or_with_foreign_certs(
    pki: TestPki, other_pki: TestPki
) -> None:
    ctx = server_ssl_context(
        pki.server.cert_file, pki.server.key_file, pki.ca_cert_file, require_client_cert=True
    )
    intruder = other_pki.clients["intruder"]
    async with tls_server(ctx) as (port, seen):
        for client_ctx in (
            client_ssl_context(pki.ca_cert_file),
            client_ssl_context(pki.ca_cert_file, cert_file=intruder.cert_file, key_file=intruder.key_file),
        ):
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                line = await client_roundtrip(port, client_ctx)
                # TLS 1.3: the client may finish its side before the server rejects the cert
                if not line:
                    raise ConnectionError("closed by the server")
    assert seen == []


async def test_optional_client_cert(pki: TestPki) -> None:
    ctx = server_ssl_context(pki.server.cert_file, pki.server.key_file, pki.ca_cert_file)
    admin = pki.clients["admin"]
    async with tls_server(ctx) as (port, _):
        assert await client_roundtrip(port, client_ssl_context(pki.ca_cert_file)) == b"-\n"
        with_cert = client_ssl_context(pki.ca_cert_file, cert_file=admin.cert_file, key_file=admin.key_file)
        assert await client_roundtrip(port, with_cert) == b"admin\n"


def test_context_config_errors(pki: TestPki, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AuthConfigError, match="cannot load certificate"):
        server_ssl_context(str(tmp_path / "missing.pem"), pki.server.key_file)
    with pytest.raises(AuthConfigError, match="trust bundle"):
        server_ssl_context(pki.server.cert_file, pki.server.key_file, require_client_cert=True)
    with pytest.raises(AuthConfigError, match="TLS protocol"):
        server_ssl_context(pki.server.cert_file, pki.server.key_file, protocols=("SSLv3",))
    ctx = server_ssl_context(pki.server.cert_file, pki.server.key_file, protocols=("TLSv1.3",))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


def test_peer_common_name_edge_cases() -> None:
    assert peer_common_name(None) is None
    assert peer_common_name({}) is None
    assert peer_common_name(b"") is None
    assert peer_common_name(b"not a certificate") is None
    assert peer_common_name({"subject": ((("organizationName", "x"),),)}) is None
