"""JWT provider: HS256 / RS256 / ES256, expiry against the injected clock, every kind of bad token."""

from __future__ import annotations

import base64
import json
import os

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
from magnetar.broker.auth.providers import Credentials
from magnetar.broker.auth.token import TokenProvider, load_public_key
from magnetar.testing.clock import ManualClock


def creds(token: str | bytes) -> Credentials:
    return Credentials(token.encode() if isinstance(token, str) else token)


def now_s(clock: ManualClock) -> int:
    return clock.time_ms() // 1000


@pytest.fixture
def hs(clock: ManualClock, secret_key: bytes) -> TokenProvider:
    return TokenProvider(clock, secret_key=secret_key)


def test_hs256_role_from_sub_and_expiry_exposed(
    hs: TokenProvider, clock: ManualClock, secret_key: bytes
) -> None:
    exp = now_s(clock) + 3600
    result = hs.authenticate(creds(jwt.encode({"sub": "alice", "exp": exp}, secret_key, "HS256")))
    assert (result.role, result.method, result.expires_at_ms) == ("alice", "token", exp * 1000)
    no_exp = hs.authenticate(creds(jwt.encode({"sub": "bob"}, secret_key, "HS256")))
    assert no_exp.role == "bob" and no_exp.expires_at_ms is None


def test_bearer_prefix_is_accepted(hs: TokenProvider, secret_key: bytes) -> None:
    token = jwt.encode({"sub": "alice"}, secret_key, "HS256")
    assert hs.authenticate(creds("Bearer " + token)).role == "alice"


async def test_expiry_follows_the_injected_clock(
    hs: TokenProvider, clock: ManualClock, secret_key: bytes
) -> None:
    token = jwt.encode({"sub": "alice", "exp": now_s(clock) + 10}, secret_key, "HS256")
    assert hs.authenticate(creds(token)).role == "alice"
    await clock.advance(10)
    with pytest.raises(AuthenticationError, match="expired"):
        hs.authenticate(creds(token))


def test_not_before_in_the_future_is_refused(
    hs: TokenProvider, clock: ManualClock, secret_key: bytes
) -> None:
    token = jwt.encode({"sub": "alice", "nbf": now_s(clock) + 60}, secret_key, "HS256")
    with pytest.raises(AuthenticationError, match="not valid yet"):
        hs.authenticate(creds(token))


def test_wrong_secret_is_a_bad_signature(hs: TokenProvider) -> None:
    token = jwt.encode({"sub": "alice"}, os.urandom(32), "HS256")
    with pytest.raises(AuthenticationError, match="signature"):
        hs.authenticate(creds(token))


def test_alg_none_is_refused(hs: TokenProvider) -> None:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps({"sub": "root"}).encode()).rstrip(b"=")
    with pytest.raises(AuthenticationError):
        hs.authenticate(creds(header + b"." + body + b"."))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"not-a-jwt",
        b"a.b.c",
        b"\xff\xfe\x00garbage",
        b"eyJhbGciOiJIUzI1NiJ9.!!!.sig",
        b"abc\x01def",
        os.urandom(64),
    ],
)
def test_garbage_is_an_authentication_error(hs: TokenProvider, raw: bytes) -> None:
    with pytest.raises(AuthenticationError):
        hs.authenticate(creds(raw))


def test_role_claim_must_be_a_string(hs: TokenProvider, secret_key: bytes) -> None:
    for claims in ({}, {"sub": 42}, {"sub": ""}, {"sub": ["a"]}):
        with pytest.raises(AuthenticationError, match="no role"):
            hs.authenticate(creds(jwt.encode(claims, secret_key, "HS256")))
    with pytest.raises(AuthenticationError, match="not a number"):
        hs.authenticate(creds(jwt.encode({"sub": "a", "exp": "tomorrow"}, secret_key, "HS256")))


def test_configured_role_claim_and_audience(clock: ManualClock, secret_key: bytes) -> None:
    p = TokenProvider(clock, secret_key=secret_key, role_claim="role", audience="magnetar")
    good = jwt.encode({"role": "svc", "aud": ["x", "magnetar"]}, secret_key, "HS256")
    assert p.authenticate(creds(good)).role == "svc"
    wrong_aud = jwt.encode({"role": "svc", "aud": "other"}, secret_key, "HS256")
    with pytest.raises(AuthenticationError, match="audience"):
        p.authenticate(creds(wrong_aud))


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_public_key_algorithms(clock: ManualClock, rsa_key, ec_key, alg: str) -> None:  # type: ignore[no-untyped-def]
    private = rsa_key if alg == "RS256" else ec_key
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for encoded in (pem, der):
        p = TokenProvider(clock, public_key=load_public_key(encoded), public_alg=alg)
        token = jwt.encode({"sub": "carol", "exp": now_s(clock) + 60}, private, alg)
        assert p.authenticate(creds(token)).role == "carol"
    # signed by another key of the same kind: refused
    p = TokenProvider(clock, public_key=load_public_key(pem), public_alg=alg)
    forged = jwt.encode(
        {"sub": "carol"}, (ec_key if alg == "RS256" else rsa_key), "ES256" if alg == "RS256" else "RS256"
    )
    with pytest.raises(AuthenticationError):
        p.authenticate(creds(forged))


def test_hmac_with_the_public_key_as_secret_is_refused(clock: ManualClock, rsa_key) -> None:  # type: ignore[no-untyped-def]
    pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    p = TokenProvider(clock, public_key=load_public_key(pem), public_alg="RS256")
    # the classic algorithm-confusion forgery: HS256 keyed with the public key bytes
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")
    body = base64.urlsafe_b64encode(b'{"sub":"root"}').rstrip(b"=")
    import hashlib
    import hmac

    sig = base64.urlsafe_b64encode(hmac.new(pem, header + b"." + body, hashlib.sha256).digest()).rstrip(b"=")
    with pytest.raises(AuthenticationError, match="algorithm"):
        p.authenticate(creds(header + b"." + body + b"." + sig))


def test_from_config_reads_key_sources(tmp_path, clock: ManualClock, secret_key: bytes, ec_key) -> None:  # type: ignore[no-untyped-def]
    b64 = base64.b64encode(secret_key).decode()
    p = TokenProvider.from_config(AuthConfig(token_secret_key=f"data:;base64,{b64}"), clock)
    assert p.authenticate(creds(jwt.encode({"sub": "a"}, secret_key, "HS256"))).role == "a"
    pub = tmp_path / "pub.key"
    pub.write_bytes(
        ec_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    p = TokenProvider.from_config(
        AuthConfig(token_public_key=f"file://{pub}", token_public_alg="ES256"), clock
    )
    assert p.authenticate(creds(jwt.encode({"sub": "b"}, ec_key, "ES256"))).role == "b"
    with pytest.raises(AuthConfigError):
        TokenProvider.from_config(AuthConfig(), clock)
    with pytest.raises(AuthConfigError, match="public key"):
        TokenProvider.from_config(AuthConfig(token_public_key="data:,notakey"), clock)
