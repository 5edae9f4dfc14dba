"""Authentication providers for the binary protocol: token (static or supplier), basic, TLS.

Theory of operation: a provider tells the connection two things: the
``auth_method_name`` that goes in CONNECT and the ``auth_data`` bytes, asked
afresh for every CONNECT and for every AUTH_CHALLENGE the broker sends when a
credential is about to expire (so a token supplier is called again then, and a
refreshed token reaches the broker without a reconnect). The names and
payloads are Pulsar's: ``token`` carries the JWT, ``basic`` carries
``user:password``, ``tls`` carries nothing -- the client certificate is
presented in the TLS handshake, so ``AuthenticationTLS`` also gives the paths
the connection loads into its SSL context. Suppliers may be plain functions or
coroutine functions; they must be cheap (they run on the event loop).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar.client.errors import InvalidConfiguration


class Authentication:
    """Base class; the default sends ``none``."""

    auth_method_name = "none"
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    async def auth_data(self) -> bytes | None:
        return None

    def http_headers(self, data: bytes | None) -> dict[str, str]:
        return {}


class AuthenticationToken(Authentication):
    """A JWT, given as a string or as a function (sync or async) returning the current token."""

    auth_method_name = "token"

    def __init__(self, token: str | Callable[[], str] | Callable[[], Awaitable[str]]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise InvalidConfiguration("AuthenticationToken needs a token string or a function returning one")
        if isinstance(token, str) and not token:
            raise InvalidConfiguration("AuthenticationToken: empty token")
        self._token = token

    async def auth_data(self) -> bytes:
        token = self._token
        if callable(token):
            value = token()
            if inspect.isawaitable(value):
                value = await value
            token = value
        if not isinstance(token, str) or not token:
            raise InvalidConfiguration("the token supplier returned no token")
        return token.encode()

    def http_headers(self, data: bytes | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {(data or b'').decode()}"}


@dataclass
class AuthenticationBasic(Authentication):
    """HTTP-basic-style credentials (Pulsar's ``AuthenticationBasic``)."""

    username: str
    password: str
    auth_method_name = "basic"

    async def auth_data(self) -> bytes:
        return f"{self.username}:{self.password}".encode()

    def http_headers(self, data: bytes | None) -> dict[str, str]:
        import base64

        return {"Authorization": "Basic " + base64.b64encode(data or b"").decode()}


class AuthenticationTLS(Authentication):
    """A client certificate and key (PEM files) presented in the TLS handshake."""

    auth_method_name = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        self.tls_cert_file = certificate_path
        self.tls_key_file = private_key_path

    async def auth_data(self) -> bytes:
        return b""
