"""Per-connection authentication state: CONNECT, then refresh through AUTH_CHALLENGE.

Theory of operation: Pulsar re-checks the credentials of every connection
every ``authenticationRefreshCheckSeconds``.  A credential with an expiry (a
JWT with ``exp``) must be replaced before it runs out: the broker sends
``AUTH_CHALLENGE`` (method name + the bytes ``PulsarAuthRefresh``), the client
answers ``AUTH_RESPONSE`` with fresh ``auth_data``, and the broker verifies it
as at ``CONNECT``.  A client that did not advertise
``FeatureFlags.supports_auth_refresh`` cannot answer, so its connection is
closed once the credential has expired.  This module is sans-IO: the
connection owns the timer and the socket, and asks :meth:`AuthSession.check_refresh`
what to do on each tick.

State machine (transitions only in ``_TRANSITIONS``; anything else is a bug):

    NEW --connect ok--> AUTHENTICATED --challenge--> REFRESHING
    REFRESHING --response ok--> AUTHENTICATED
    any --failure / expiry--> CLOSED (the connection must be closed)

Rules:
* we challenge when the credential would expire before the next check
  (``expires_at - refresh_check <= now``), so a live client never sees a gap;
* expired and still REFRESHING (no answer), or expired without refresh
  support -> DISCONNECT;
* the refreshed credential must use the same method and give the same role
  (a connection does not change identity midway);
* credentials without expiry (basic, TLS, anonymous) never need refresh.

Refusing a CONNECT, and the official C++ client (pulsar-client 3.13.0,
observed): an ERROR answer to CONNECT (what Java sends) makes the client drop
the connection and *retry* until its operation timeout, so a wrong password
surfaces as a Timeout.  Answering CONNECTED and then every request with
``AuthenticationError`` (PARTITIONED_METADATA/LOOKUP Failed responses, ERROR
for the rest) and closing makes it fail at once with AuthenticationError.
After a failed :meth:`AuthSession.connect`, ``rejection`` keeps the error for
that second way; such a session stays CLOSED and ``is_authenticated`` is False,
so the connection must serve nothing on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from magnetar.broker.auth.errors import AuthenticationError
from magnetar.broker.auth.providers import AuthResult
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.tls import PeerCert
from magnetar.broker.errors import BrokerError
from magnetar.runtime.clock import Clock

REFRESH_AUTH_DATA = b"PulsarAuthRefresh"


class AuthSessionState(enum.Enum):
    NEW = "new"
    AUTHENTICATED = "authenticated"
    REFRESHING = "refreshing"
    CLOSED = "closed"


_TRANSITIONS: dict[AuthSessionState, frozenset[AuthSessionState]] = {
    AuthSessionState.NEW: frozenset({AuthSessionState.AUTHENTICATED, AuthSessionState.CLOSED}),
    AuthSessionState.AUTHENTICATED: frozenset({AuthSessionState.REFRESHING, AuthSessionState.CLOSED}),
    AuthSessionState.REFRESHING: frozenset({AuthSessionState.AUTHENTICATED, AuthSessionState.CLOSED}),
    AuthSessionState.CLOSED: frozenset(),
}


class RefreshAction(enum.Enum):
    NONE = "none"
    SEND_CHALLENGE = "send_challenge"
    DISCONNECT = "disconnect"


@dataclass(frozen=True, slots=True)
class AuthChallenge:
    """What goes into CommandAuthChallenge.challenge (AuthData)."""

    auth_method_name: str
    auth_data: bytes = REFRESH_AUTH_DATA


class AuthSession:
    def __init__(
        self,
        service: AuthenticationService,
        clock: Clock,
        *,
        supports_auth_refresh: bool = False,
        tls_peer_cert: PeerCert | None = None,
    ) -> None:
        self._service = service
        self._clock = clock
        self._supports_refresh = supports_auth_refresh
        self._peer = tls_peer_cert
        self._refresh_check_ms = service.config.authentication_refresh_check_seconds * 1000
        self.state = AuthSessionState.NEW
        self.result: AuthResult | None = None
        self.rejection: BrokerError | None = None

    @property
    def role(self) -> str | None:
        return self.result.role if self.result else None

    @property
    def is_authenticated(self) -> bool:
        """True while the connection may serve requests (AUTHENTICATED or REFRESHING)."""
        return self.state in (AuthSessionState.AUTHENTICATED, AuthSessionState.REFRESHING)

    def _move(self, to: AuthSessionState) -> None:
        if to not in _TRANSITIONS[self.state]:
            raise AssertionError(f"auth session: illegal transition {self.state.name} -> {to.name}")
        self.state = to

    async def connect(self, method_name: str | None, auth_data: bytes) -> AuthResult:
        """CONNECT: authenticate; on failure the session is CLOSED and the error propagates."""
        if self.state is not AuthSessionState.NEW:
            raise AuthenticationError("the connection is already authenticated")
        try:
            result = await self._service.authenticate(method_name, auth_data, self._peer)
        except BrokerError as exc:
            self.rejection = exc
            self._move(AuthSessionState.CLOSED)
            raise
        except Exception:
            self._move(AuthSessionState.CLOSED)
            raise
        self.result = result
        self._move(AuthSessionState.AUTHENTICATED)
        return result

    def check_refresh(self) -> RefreshAction:
        """Called every refresh check period (and may be called at any time)."""
        if self.state is AuthSessionState.CLOSED:
            return RefreshAction.DISCONNECT
        if self.state is AuthSessionState.NEW or self.result is None:
            return RefreshAction.NONE
        expires = self.result.expires_at_ms
        if expires is None or not self._service.enabled:
            return RefreshAction.NONE
        now = self._clock.time_ms()
        if now >= expires and (self.state is AuthSessionState.REFRESHING or not self._supports_refresh):
            self._move(AuthSessionState.CLOSED)
            return RefreshAction.DISCONNECT
        if self.state is AuthSessionState.AUTHENTICATED and self._supports_refresh:
            if expires - self._refresh_check_ms <= now:
                return RefreshAction.SEND_CHALLENGE
        return RefreshAction.NONE

    def challenge(self) -> AuthChallenge:
        """Record that AUTH_CHALLENGE is being sent; returns what to put in it."""
        assert self.result is not None
        self._move(AuthSessionState.REFRESHING)
        return AuthChallenge(self.result.method)

    async def on_auth_response(self, method_name: str | None, auth_data: bytes) -> AuthResult:
        """AUTH_RESPONSE: verify the fresh credential; any failure closes the session."""
        if self.state is not AuthSessionState.REFRESHING or self.result is None:
            raise AuthenticationError("unexpected AUTH_RESPONSE: no challenge is pending")
        old = self.result
        try:
            if method_name and method_name != old.method:
                raise AuthenticationError(
                    f"AUTH_RESPONSE uses method {method_name[:64]!r}, the connection uses {old.method!r}"
                )
            fresh = await self._service.authenticate(old.method, auth_data, self._peer)
            if fresh.role != old.role:
                raise AuthenticationError("the refreshed credential belongs to a different role")
        except Exception:
            self._move(AuthSessionState.CLOSED)
            raise
        self.result = fresh
        self._move(AuthSessionState.AUTHENTICATED)
        return fresh
