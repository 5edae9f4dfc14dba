"""AuthSession: CONNECT, AUTH_CHALLENGE before expiry, AUTH_RESPONSE re-validation, disconnects."""

from __future__ import annotations

import jwt
import pytest

from magnetar.broker.auth.basic import BasicProvider, apr1_md5
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthenticationError
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.session import REFRESH_AUTH_DATA, AuthSession, AuthSessionState, RefreshAction
from magnetar.broker.auth.token import TokenProvider
from magnetar.testing.clock import ManualClock

REFRESH_S = 60


@pytest.fixture
async def svc(clock: ManualClock, secret_key: bytes):  # type: ignore[no-untyped-def]
    cfg = AuthConfig(
        authentication_enabled=True,
        authentication_providers=("token", "basic"),
        authentication_refresh_check_seconds=REFRESH_S,
    )
    s = AuthenticationService(
        cfg,
        {
            "token": TokenProvider(clock, secret_key=secret_key),
            "basic": BasicProvider.from_text(f"alice:{apr1_md5(b'pw', b'salt')}\n"),
        },
    )
    yield s
    await s.aclose()


def token(clock: ManualClock, key: bytes, sub: str, ttl_s: int) -> bytes:
    return jwt.encode({"sub": sub, "exp": clock.time_ms() // 1000 + ttl_s}, key, "HS256").encode()


async def test_refresh_cycle(svc: AuthenticationService, clock: ManualClock, secret_key: bytes) -> None:
    s = AuthSession(svc, clock, supports_auth_refresh=True)
    await s.connect("token", token(clock, secret_key, "alice", 300))
    assert s.state is AuthSessionState.AUTHENTICATED and s.role == "alice"
    assert s.check_refresh() is RefreshAction.NONE
    await clock.advance(300 - REFRESH_S)  # would expire before the next check: challenge now
    assert s.check_refresh() is RefreshAction.SEND_CHALLENGE
    ch = s.challenge()
    assert (ch.auth_method_name, ch.auth_data) == ("token", REFRESH_AUTH_DATA)
    assert s.state is AuthSessionState.REFRESHING
    assert s.check_refresh() is RefreshAction.NONE  # waiting for the answer, not expired yet
    fresh = await s.on_auth_response("token", token(clock, secret_key, "alice", 600))
    assert s.state is AuthSessionState.AUTHENTICATED
    assert fresh.expires_at_ms == clock.time_ms() + 600_000
    assert s.check_refresh() is RefreshAction.NONE


async def test_unanswered_challenge_disconnects_at_expiry(
    svc: AuthenticationService, clock: ManualClock, secret_key: bytes
) -> None:
    s = AuthSession(svc, clock, supports_auth_refresh=True)
    await s.connect("token", token(clock, secret_key, "alice", 100))
    assert s.check_refresh() is RefreshAction.NONE
    await clock.advance(40)
    assert s.check_refresh() is RefreshAction.SEND_CHALLENGE
    s.challenge()
    await clock.advance(59)
    assert s.check_refresh() is RefreshAction.NONE
    await clock.advance(1)
    assert s.check_refresh() is RefreshAction.DISCONNECT
    assert s.state is AuthSessionState.CLOSED


async def test_client_without_refresh_support_is_disconnected_only_at_expiry(
    svc: AuthenticationService, clock: ManualClock, secret_key: bytes
) -> None:
    s = AuthSession(svc, clock, supports_auth_refresh=False)
    await s.connect("token", token(clock, secret_key, "alice", 100))
    assert s.check_refresh() is RefreshAction.NONE
    await clock.advance(99)
    assert s.check_refresh() is RefreshAction.NONE
    await clock.advance(1)
    assert s.check_refresh() is RefreshAction.DISCONNECT


@pytest.mark.parametrize("bad", ["other-role", "expired", "garbage", "method"])
async def test_bad_auth_response_closes(
    svc: AuthenticationService, clock: ManualClock, secret_key: bytes, bad: str
) -> None:
    s = AuthSession(svc, clock, supports_auth_refresh=True)
    await s.connect("token", token(clock, secret_key, "alice", 30))
    s.challenge()
    method, data = (
        "token",
        {
            "other-role": token(clock, secret_key, "mallory", 600),
            "expired": token(clock, secret_key, "alice", -1),
            "garbage": b"\x00\xffnope",
            "method": b"alice:pw",
        }[bad],
    )
    if bad == "method":
        method = "basic"
    with pytest.raises(AuthenticationError):
        await s.on_auth_response(method, data)
    assert s.state is AuthSessionState.CLOSED
    assert s.check_refresh() is RefreshAction.DISCONNECT


async def test_non_expiring_credentials_never_refresh(svc: AuthenticationService, clock: ManualClock) -> None:
    s = AuthSession(svc, clock, supports_auth_refresh=True)
    await s.connect("basic", b"alice:pw")
    await clock.advance(10 * 365 * 86400)
    assert s.check_refresh() is RefreshAction.NONE


async def test_failed_connect_and_unexpected_response(svc: AuthenticationService, clock: ManualClock) -> None:
    s = AuthSession(svc, clock)
    with pytest.raises(AuthenticationError):
        await s.connect("basic", b"alice:wrong")
    assert s.state is AuthSessionState.CLOSED and not s.is_authenticated
    assert isinstance(s.rejection, AuthenticationError) and "wrong password" in s.rejection.message
    s2 = AuthSession(svc, clock)
    await s2.connect("basic", b"alice:pw")
    assert s2.is_authenticated and s2.rejection is None
    with pytest.raises(AuthenticationError, match="no challenge"):
        await s2.on_auth_response("basic", b"alice:pw")
    with pytest.raises(AuthenticationError, match="already"):
        await s2.connect("basic", b"alice:pw")
