"""The authentication provider interface, its result, and the TLS provider.

Theory of operation: a provider verifies one kind of credential and answers
with an :class:`AuthResult` (the role, the method, and when the credential
stops being valid) or raises :class:`AuthenticationError`.  Providers are
pure and synchronous: key material is loaded when they are built, checking a
credential is CPU work only (a bcrypt check is the slow one: see
``basic.py``).  The clock is injected so expiry is testable.

What a provider receives (:class:`Credentials`) is the same whether it came
from a ``CONNECT``/``AUTH_RESPONSE`` (``auth_data`` bytes as the client sent
them) or from HTTP (the service strips the ``Bearer``/``Basic`` scheme and
hands over the same bytes the binary client would have sent), plus the TLS
peer certificate when the connection is TLS.

Method names are the ones clients send in ``auth_method_name``: ``token``,
``basic``, ``tls``.  ``none`` is what a client without authentication sends;
it, and any name no provider claims, gets ``anonymousUserRole`` when one is
configured (the service does that, see ``service.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.auth.errors import AuthenticationError
from magnetar.broker.auth.tls import PeerCert, peer_common_name

ANONYMOUS_METHOD = "anonymous"
NO_AUTH_METHOD = "none"


@dataclass(frozen=True, slots=True)
class AuthResult:
    """Who the peer is.  ``expires_at_ms`` is wall-clock ms (None: never expires).

    ``role`` is None only when authentication is disabled (Pulsar's null role).
    """

    role: str | None
    method: str
    expires_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Credentials:
    auth_data: bytes
    tls_peer_cert: PeerCert | None = None
    from_http: bool = False


class AuthenticationProvider(Protocol):
    method_name: str

    def authenticate(self, creds: Credentials) -> AuthResult:
        """Verify the credentials; raise AuthenticationError with a clear message."""
        ...


class TlsProvider:
    """Role = the subject CN of the client certificate (``AuthenticationProviderTls``).

    The handshake already verified the certificate against the trust bundle;
    a connection that has no certificate (plain TCP, or TLS without one) fails.
    """

    method_name = "tls"

    def authenticate(self, creds: Credentials) -> AuthResult:
        if creds.tls_peer_cert is None or creds.tls_peer_cert in ({}, b""):
            raise AuthenticationError("Failed to authenticate: no TLS client certificate on this connection")
        cn = peer_common_name(creds.tls_peer_cert)
        if not cn:
            raise AuthenticationError("Failed to authenticate: the client certificate has no CN")
        return AuthResult(role=cn, method=self.method_name)


def decode_text(data: bytes, what: str) -> str:
    """Credentials are text; undecodable or control-character garbage is refused here."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError(f"Failed to authenticate: {what} is not valid UTF-8") from None
    if any(ord(c) < 0x20 and c not in "\t" for c in text):
        raise AuthenticationError(f"Failed to authenticate: {what} contains control characters")
    return text
