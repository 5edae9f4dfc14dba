"""Property tests: whatever bytes arrive as credentials, only typed errors come out."""

from __future__ import annotations

import asyncio

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.broker.auth.basic import BasicProvider, apr1_md5
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthenticationError
from magnetar.broker.auth.providers import AuthResult, Credentials, TlsProvider
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.token import TokenProvider
from magnetar.broker.errors import TooManyRequestsError
from magnetar.testing.clock import ManualClock

SECRET = b"s" * 32
CLOCK = ManualClock()
TOKEN = TokenProvider(CLOCK, secret_key=SECRET)
BASIC = BasicProvider.from_text(f"alice:{apr1_md5(b'pw', b'salt')}\n")
TLS = TlsProvider()

# printable-ish JWT-looking text: three dot-separated base64url-ish segments
_seg = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/", max_size=60)
jwt_like = st.builds(lambda a, b, c: f"{a}.{b}.{c}".encode(), _seg, _seg, _seg)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), jwt_like))
def test_token_provider_only_raises_authentication_error(data: bytes) -> None:
    try:
        result = TOKEN.authenticate(Credentials(data))
    except AuthenticationError:
        return
    assert isinstance(result, AuthResult)  # only a validly signed token gets here


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=8), st.none(), st.floats())
    )
)
def test_signed_but_odd_claims_never_crash(claims: dict) -> None:  # type: ignore[type-arg]
    token = jwt.encode(claims, SECRET, "HS256").encode()
    try:
        result = TOKEN.authenticate(Credentials(token))
    except AuthenticationError:
        return
    assert result.role == claims["sub"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_basic_and_tls_only_raise_authentication_error(data: bytes) -> None:
    for provider, creds in ((BASIC, Credentials(data)), (TLS, Credentials(b"", tls_peer_cert=data))):
        try:
            provider.authenticate(creds)
        except AuthenticationError:
            pass


class SlowProvider:
    method_name = "slow"
    blocking = True

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()

    def authenticate(self, creds: Credentials) -> AuthResult:
        self.release.wait(10)
        return AuthResult(role="slow", method="slow")


async def test_blocking_checks_are_bounded() -> None:
    slow = SlowProvider()
    svc = AuthenticationService(
        AuthConfig(authentication_enabled=True, authentication_providers=()),
        {"slow": slow},  # type: ignore[dict-item]
        max_blocking_in_flight=1,
    )
    first = asyncio.create_task(svc.authenticate("slow", b""))
    await asyncio.sleep(0.05)
    assert svc.statistics()["blocking_in_flight"] == 1
    with pytest.raises(TooManyRequestsError):
        await svc.authenticate("slow", b"")
    slow.release.set()
    assert (await asyncio.wait_for(first, 10)).role == "slow"
    assert svc.statistics()["blocking_in_flight"] == 0
    await svc.aclose()
