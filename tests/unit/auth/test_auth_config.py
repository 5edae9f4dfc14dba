"""AuthConfig from Pulsar keys, and key sources (data:, file:, path, base64)."""

from __future__ import annotations

import base64

import pytest

from magnetar.broker.auth.config import AuthConfig, read_key_source
from magnetar.broker.auth.errors import AuthConfigError
from magnetar.broker.config import BrokerConfig, parse_properties

CONF = """
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,\\
  org.apache.pulsar.broker.authentication.AuthenticationProviderTls, basic
authorizationEnabled=true
superUserRoles=admin, ops
anonymousUserRole=anon
authenticateOriginalAuthData=true
tokenSecretKey=data:;base64,c2VjcmV0
tokenAuthClaim=role
tokenAudience=magnetar
tlsRequireTrustedClientCertOnConnect=true
tlsTrustCertsFilePath=/ca.pem
tlsCertificateFilePath=/cert.pem
tlsKeyFilePath=/key.pem
brokerServicePortTls=6651
webServicePortTls=
"""


def test_pulsar_keys_and_provider_class_names() -> None:
    cfg = AuthConfig.from_properties(parse_properties(CONF))
    assert cfg.authentication_enabled and cfg.authorization_enabled
    assert cfg.authentication_providers == ("token", "tls", "basic")
    assert cfg.super_user_roles == frozenset({"admin", "ops"})
    assert cfg.anonymous_user_role == "anon"
    assert cfg.authenticate_original_auth_data
    assert cfg.token_auth_claim == "role" and cfg.token_audience == "magnetar"
    assert cfg.token_audience_claim == "aud" and cfg.token_public_alg == "RS256"
    assert cfg.broker_service_port_tls == 6651 and cfg.web_service_port_tls is None
    assert cfg.tls_enabled and cfg.tls_require_trusted_client_cert_on_connect


def test_defaults_are_pulsars() -> None:
    cfg = AuthConfig.from_properties({})
    assert not cfg.authentication_enabled and not cfg.authorization_enabled
    assert cfg.token_auth_claim == "sub" and cfg.anonymous_user_role is None
    assert cfg.authentication_refresh_check_seconds == 60 and not cfg.tls_enabled


def test_reads_the_keys_broker_config_keeps_in_extra() -> None:
    bc = BrokerConfig().with_overrides({"authenticationEnabled": "true", "authenticationProviders": "token"})
    cfg = AuthConfig.from_properties(bc.as_properties())
    assert cfg.authentication_enabled and cfg.authentication_providers == ("token",)


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        ({"authenticationEnabled": "maybe"}, "authenticationEnabled"),
        ({"brokerServicePortTls": "x"}, "brokerServicePortTls"),
        ({"brokerServicePortTls": "70000"}, "port number"),
        (
            {"authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderSasl"},
            "not supported",
        ),
        ({"brokerServicePortTls": "6651"}, "tlsCertificateFilePath"),
        ({"tlsRequireTrustedClientCertOnConnect": "true"}, "tlsTrustCertsFilePath"),
    ],
)
def test_bad_values_name_the_key(props: dict[str, str], needle: str) -> None:
    with pytest.raises(AuthConfigError, match=needle):
        AuthConfig.from_properties(props)


def test_key_sources(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = bytes(range(40))
    f = tmp_path / "k.bin"
    f.write_bytes(raw)
    b64 = base64.b64encode(raw).decode()
    assert read_key_source(f"data:;base64,{b64}") == raw
    assert read_key_source("data:,hello%20world") == b"hello world"
    assert read_key_source(f"file://{f}") == raw
    assert read_key_source(str(f)) == raw
    assert read_key_source(b64) == raw
    assert read_key_source(base64.urlsafe_b64encode(raw).decode().rstrip("=")) == raw


@pytest.mark.parametrize(
    "bad", ["file:///no/such/file", "/no/such/file.key", "data:;base64,@@@", "data:nocomma"]
)
def test_bad_key_sources(bad: str) -> None:
    with pytest.raises(AuthConfigError):
        read_key_source(bad, "tokenSecretKey")
