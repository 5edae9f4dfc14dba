"""AuthenticationService: method dispatch, anonymous fallback, HTTP headers, limits."""

from __future__ import annotations

import base64

import jwt
import pytest

from magnetar.broker.auth.basic import BasicProvider, apr1_md5
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
from magnetar.broker.auth.providers import TlsProvider
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.token import TokenProvider
from magnetar.broker.errors import Code
from magnetar.testing.clock import ManualClock

PEER = {"subject": ((("organizationName", "Magnetar test"),), (("commonName", "tls-client"),))}


def make_service(clock: ManualClock, secret_key: bytes, **cfg: object) -> AuthenticationService:
    config = AuthConfig(
        authentication_enabled=True, authentication_providers=("token", "basic", "tls"), **cfg
    )  # type: ignore[arg-type]
    providers = {
        "token": TokenProvider(clock, secret_key=secret_key),
        "basic": BasicProvider.from_text(f"alice:{apr1_md5(b'pw', b'salt')}\n"),
        "tls": TlsProvider(),
    }
    return AuthenticationService(config, providers)


@pytest.fixture
async def svc(clock: ManualClock, secret_key: bytes):  # type: ignore[no-untyped-def]
    s = make_service(clock, secret_key)
    yield s
    await s.aclose()


async def test_binary_methods(svc: AuthenticationService, secret_key: bytes) -> None:
    token = jwt.encode({"sub": "tok-role"}, secret_key, "HS256").encode()
    assert (await svc.authenticate("token", token)).role == "tok-role"
    assert (await svc.authenticate("basic", b"alice:pw")).role == "alice"  # runs on the executor
    assert (await svc.authenticate("tls", b"", PEER)).role == "tls-client"


async def test_errors_are_typed_with_wire_and_http_codes(svc: AuthenticationService) -> None:
    with pytest.raises(AuthenticationError) as info:
        await svc.authenticate("basic", b"alice:nope")
    assert info.value.server_error is Code.AuthenticationError and info.value.http_status == 401
    with pytest.raises(AuthenticationError, match="no TLS client certificate"):
        await svc.authenticate("tls", b"", None)


async def test_unknown_method_without_anonymous_role_is_refused(svc: AuthenticationService) -> None:
    with pytest.raises(AuthenticationError, match="No anonymous role"):
        await svc.authenticate("sasl", b"whatever")
    with pytest.raises(AuthenticationError, match="No anonymous role"):
        await svc.authenticate(None, b"")


async def test_anonymous_fallback_for_unknown_method(clock: ManualClock, secret_key: bytes) -> None:
    s = make_service(clock, secret_key, anonymous_user_role="anon")
    for method in ("none", "athenz", "x" * 500, None):
        r = await s.authenticate(method, b"junk")
        assert (r.role, r.method) == ("anon", "anonymous")
    # a known method with bad credentials does not fall back
    with pytest.raises(AuthenticationError):
        await s.authenticate("token", b"garbage")
    await s.aclose()


async def test_disabled_authentication_passes_with_null_role(clock: ManualClock) -> None:
    s = AuthenticationService(AuthConfig(), {})
    r = await s.authenticate("token", b"anything at all")
    assert r.role is None
    assert (await s.authenticate_http({"Authorization": "Bearer x"})).role is None
    await s.aclose()


async def test_oversized_credentials_are_refused_before_parsing(
    clock: ManualClock, secret_key: bytes
) -> None:
    s = make_service(clock, secret_key, anonymous_user_role="anon", max_auth_data_bytes=1024)
    with pytest.raises(AuthenticationError, match="exceed the limit"):
        await s.authenticate("token", b"a" * 1025)
    with pytest.raises(AuthenticationError, match="exceed the limit"):
        await s.authenticate_http({"Authorization": "Bearer " + "a" * 2000})
    await s.aclose()


async def test_http_headers(svc: AuthenticationService, secret_key: bytes) -> None:
    token = jwt.encode({"sub": "tok-role"}, secret_key, "HS256")
    assert (await svc.authenticate_http({"Authorization": f"Bearer {token}"})).role == "tok-role"
    assert (await svc.authenticate_http({"authorization": f"bearer {token}"})).role == "tok-role"
    basic = base64.b64encode(b"alice:pw").decode()
    assert (await svc.authenticate_http({"Authorization": f"Basic {basic}"})).role == "alice"
    hinted = {"Authorization": f"Bearer {token}", "X-Pulsar-Auth-Method-Name": "token"}
    assert (await svc.authenticate_http(hinted)).role == "tok-role"
    assert (await svc.authenticate_http({}, PEER)).role == "tls-client"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic !!!notbase64"},
        {"Authorization": "Basic " + base64.b64encode(b"alice:wrong").decode()},
        {"Authorization": "Bearer garbage"},
        {"Authorization": "Negotiate abc"},
    ],
)
async def test_http_bad_or_missing_credentials(svc: AuthenticationService, headers: dict[str, str]) -> None:
    with pytest.raises(AuthenticationError):
        await svc.authenticate_http(headers)


async def test_http_without_credentials_gets_anonymous_role(clock: ManualClock, secret_key: bytes) -> None:
    s = make_service(clock, secret_key, anonymous_user_role="anon")
    assert (await s.authenticate_http({})).role == "anon"
    with pytest.raises(AuthenticationError):  # wrong password is not downgraded to anonymous
        await s.authenticate_http({"Authorization": "Basic " + base64.b64encode(b"alice:no").decode()})
    await s.aclose()


def test_enabled_without_providers_or_anonymous_is_a_config_error() -> None:
    with pytest.raises(AuthConfigError):
        AuthenticationService(AuthConfig(authentication_enabled=True), {})


async def test_from_config_builds_providers(tmp_path, clock: ManualClock, secret_key: bytes) -> None:  # type: ignore[no-untyped-def]
    key = tmp_path / "secret.key"
    key.write_bytes(secret_key)
    ht = tmp_path / "htpasswd"
    ht.write_text(f"alice:{apr1_md5(b'pw', b's')}\n")
    cfg = AuthConfig.from_properties(
        {
            "authenticationEnabled": "true",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
            "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
            "tokenSecretKey": f"file://{key}",
            "basicAuthConf": str(ht),
        }
    )
    s = AuthenticationService.from_config(cfg, clock)
    assert s.methods == ("token", "basic")
    assert (await s.authenticate("token", jwt.encode({"sub": "z"}, secret_key, "HS256").encode())).role == "z"
    assert (await s.authenticate("basic", b"alice:pw")).role == "alice"
    await s.aclose()
