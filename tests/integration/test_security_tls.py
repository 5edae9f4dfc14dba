"""TLS listeners of the standalone (app/tls.py), in-process: client-certificate policy and roles.

With ``tlsRequireTrustedClientCertOnConnect`` the HTTPS and binary TLS handshakes
fail without a certificate signed by the trusted CA; with one, the TLS
authentication provider takes the certificate's CN as the role (checked
through authorization: ``admin`` is a super-user, ``bob`` is not).  The
per-connection certificate record of the HTTPS server is emptied as
connections close (it is bounded by the open connections).
"""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from magnetar.testing.certs import make_test_pki
from magnetar.testing.standalone import broker_unavailable_reason, running_standalone

pytestmark = pytest.mark.skipif(
    broker_unavailable_reason() is not None, reason=str(broker_unavailable_reason())
)


def _props(pki, require: bool) -> dict[str, str]:
    return {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
        "authorizationEnabled": "true",
        "superUserRoles": "admin",
        "tlsCertificateFilePath": pki.server.cert_file,
        "tlsKeyFilePath": pki.server.key_file,
        "tlsTrustCertsFilePath": pki.ca_cert_file,
        "tlsRequireTrustedClientCertOnConnect": "true" if require else "false",
        "brokerServicePortTls": "0",
        "webServicePortTls": "0",
    }


def _ctx(pki, role: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki.ca_cert_file)
    if role is not None:
        ctx.load_cert_chain(pki.clients[role].cert_file, pki.clients[role].key_file)
    return ctx


async def _get(url: str, ctx: ssl.SSLContext) -> int:
    async with httpx.AsyncClient(verify=ctx, timeout=10) as c:
        return (await c.get(url)).status_code


async def test_required_client_certificate_and_cn_roles(tmp_path) -> None:
    pki = make_test_pki(tmp_path / "pki", ("admin", "bob"))
    async with running_standalone(tmp_path / "data", _props(pki, require=True)) as s:
        assert s.tls is not None and s.tls.web_port_tls and s.tls.broker_port_tls
        url = f"https://localhost:{s.tls.web_port_tls}/admin/v2/tenants"
        assert await _get(url, _ctx(pki, "admin")) == 200
        assert await _get(url, _ctx(pki, "bob")) == 403
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            await _get(url, _ctx(pki, None))  # no certificate: the handshake fails

        # binary protocol over TLS: the handshake needs a certificate too
        with pytest.raises((ssl.SSLError, ConnectionError)):
            reader, writer = await asyncio.open_connection(
                "localhost", s.tls.broker_port_tls, ssl=_ctx(pki, None), server_hostname="localhost"
            )
            writer.write(b"\x00\x00\x00\x01")
            await writer.drain()
            data = await asyncio.wait_for(reader.read(1), 5)
            writer.close()
            assert data == b"", "the broker answered a client without a certificate"
            raise ConnectionError("read ended")  # the read returned (EOF): refused after the handshake
        assert await _get(url, _ctx(pki, "admin")) == 200  # still serving

        await asyncio.sleep(0.2)
        assert len(s.tls.peers) == 0  # every HTTPS connection above is closed


async def test_optional_client_certificate_falls_back_to_other_credentials(tmp_path) -> None:
    pki = make_test_pki(tmp_path / "pki", ("admin",))
    async with running_standalone(tmp_path / "data", _props(pki, require=False)) as s:
        url = f"https://localhost:{s.tls.web_port_tls}/admin/v2/tenants"
        assert await _get(url, _ctx(pki, "admin")) == 200
        assert await _get(url, _ctx(pki, None)) == 401  # connected, but no credentials at all
        # plain HTTP carries no certificate: 401 as well
        async with httpx.AsyncClient(timeout=10) as c:
            assert (await c.get(f"{s.web_url}/admin/v2/tenants")).status_code == 401


def test_broker_client_credentials_from_pulsar_keys(tmp_path) -> None:
    from magnetar.app.tls import BrokerClientAuthError, broker_client_credentials

    token_plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    assert broker_client_credentials({}) is None
    p = {
        "brokerClientAuthenticationPlugin": token_plugin,
        "brokerClientAuthenticationParameters": "token:abc",
    }
    assert broker_client_credentials(p) == ("token", b"abc")
    (tmp_path / "t").write_text("from-file\n")
    p["brokerClientAuthenticationParameters"] = f"file://{tmp_path / 't'}"
    assert broker_client_credentials(p) == ("token", b"from-file")
    p["brokerClientAuthenticationParameters"] = '{"token": "token:j"}'
    assert broker_client_credentials(p) == ("token", b"j")
    basic = {
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
        "brokerClientAuthenticationParameters": '{"userId": "u", "password": "p:w"}',
    }
    assert broker_client_credentials(basic) == ("basic", b"u:p:w")
    for bad in (
        {"brokerClientAuthenticationPlugin": "com.example.Kerberos"},
        {"brokerClientAuthenticationPlugin": token_plugin, "brokerClientAuthenticationParameters": ""},
        {**basic, "brokerClientAuthenticationParameters": "not json"},
    ):
        with pytest.raises(BrokerClientAuthError):
            broker_client_credentials(bad)
