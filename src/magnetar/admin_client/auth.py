"""Client authentication for the admin REST API, in the manner of Pulsar's auth plugins.

Theory of operation: an :class:`AuthProvider` turns credentials into what an
HTTP request carries (Pulsar's ``AuthenticationDataProvider``): headers
(``Authorization: Bearer <jwt>`` for tokens, ``Authorization: Basic ...`` for
basic auth, plus the ``X-Pulsar-Auth-Method-Name`` hint Java clients send) or
a client certificate for TLS.  Providers are small immutable objects asked
for headers on every request, including each hop of a followed redirect, so
credentials reach the owner broker too.

:func:`auth_from_plugin` reads ``pulsar-admin``'s ``--auth-plugin`` /
``--auth-params`` pair (and the same keys of a ``client.conf``): the Java class
names and the short names ``token`` / ``basic`` / ``tls`` are accepted.  Token
params are ``token:<jwt>``, ``file:///path`` (or ``file:path``), a JSON
``{"token": ...}`` or a bare token; basic params are JSON
``{"userId": ..., "password": ...}`` (or ``userId:u,password:p``); TLS params
are ``tlsCertFile:<pem>,tlsKeyFile:<pem>`` (or JSON).  A token file is read
once, when the provider is made (construction happens before any event loop
work, so this read never blocks the loop).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

from magnetar.common.errors import InvalidArgument

# A token file bigger than this is not a token.
TOKEN_FILE_BYTES_MAX = 64 * 1024

TOKEN_PLUGINS = frozenset(
    {"org.apache.pulsar.client.impl.auth.AuthenticationToken", "AuthenticationToken", "token"}
)
BASIC_PLUGINS = frozenset(
    {"org.apache.pulsar.client.impl.auth.AuthenticationBasic", "AuthenticationBasic", "basic"}
)
TLS_PLUGINS = frozenset({"org.apache.pulsar.client.impl.auth.AuthenticationTls", "AuthenticationTls", "tls"})
NO_AUTH_PLUGINS = frozenset(
    {"", "org.apache.pulsar.client.impl.auth.AuthenticationDisabled", "AuthenticationDisabled", "none"}
)


class AuthConfigError(InvalidArgument):
    """The auth plugin name or its parameters cannot be used."""


@runtime_checkable
class AuthProvider(Protocol):
    """What an admin request needs to authenticate."""

    @property
    def auth_method_name(self) -> str: ...

    def http_headers(self) -> dict[str, str]:
        """Headers to add to every request (may be empty)."""
        ...

    def client_certificate(self) -> tuple[str, str] | None:
        """``(cert_file, key_file)`` for TLS client authentication, or None."""
        ...


@dataclass(frozen=True)
class TokenAuth:
    """``Authorization: Bearer <token>`` (Pulsar's AuthenticationToken)."""

    token: str = field(repr=False)
    auth_method_name: str = "token"

    def __post_init__(self) -> None:
        if not self.token or any(c in self.token for c in "\r\n"):
            raise AuthConfigError("the auth token is empty or contains a line break")

    @classmethod
    def from_file(cls, path: str | Path) -> TokenAuth:
        p = Path(path)
        try:
            size = p.stat().st_size
            if size > TOKEN_FILE_BYTES_MAX:
                raise AuthConfigError(
                    f"token file {p} is {size} bytes; a token is at most {TOKEN_FILE_BYTES_MAX}"
                )
            return cls(p.read_text(encoding="utf-8").strip())
        except OSError as e:
            raise AuthConfigError(f"cannot read token file {p}: {e.strerror or e}") from None

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "X-Pulsar-Auth-Method-Name": "token"}

    def client_certificate(self) -> tuple[str, str] | None:
        return None


@dataclass(frozen=True)
class BasicAuth:
    """``Authorization: Basic base64(user:password)`` (Pulsar's AuthenticationBasic)."""

    user_id: str
    password: str = field(repr=False)
    auth_method_name: str = "basic"

    def __post_init__(self) -> None:
        if not self.user_id or ":" in self.user_id:
            raise AuthConfigError("basic auth needs a userId without ':'")

    def http_headers(self) -> dict[str, str]:
        raw = f"{self.user_id}:{self.password}".encode()
        return {
            "Authorization": "Basic " + base64.b64encode(raw).decode("ascii"),
            "X-Pulsar-Auth-Method-Name": "basic",
        }

    def client_certificate(self) -> tuple[str, str] | None:
        return None


@dataclass(frozen=True)
class TlsAuth:
    """Client-certificate authentication (Pulsar's AuthenticationTls): the role is the cert's CN."""

    cert_file: str
    key_file: str
    auth_method_name: str = "tls"

    def http_headers(self) -> dict[str, str]:
        return {}

    def client_certificate(self) -> tuple[str, str] | None:
        return (self.cert_file, self.key_file)


def _parse_params(params: str) -> dict[str, str]:
    """JSON object or ``k1:v1,k2:v2`` (Pulsar's two params syntaxes)."""
    text = params.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise AuthConfigError(f"auth params are not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise AuthConfigError("auth params JSON must be an object")
        return {str(k): str(v) for k, v in data.items()}
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition(":")
        if not sep:
            raise AuthConfigError(f"auth param '{part}' is not key:value")
        out[key.strip()] = value.strip()
    return out


def _file_path(uri: str) -> str:
    """``file:///a/b`` -> ``/a/b``; ``file:a/b`` -> ``a/b``."""
    parsed = urlparse(uri)
    if parsed.netloc or uri.startswith("file://"):
        return unquote(parsed.netloc + parsed.path)
    return unquote(uri[len("file:") :])


def _token_auth(params: str) -> TokenAuth:
    text = params.strip()
    if text.startswith("token:"):
        return TokenAuth(text[len("token:") :])
    if text.startswith("file:"):
        return TokenAuth.from_file(_file_path(text))
    if text.startswith("{"):
        data = _parse_params(text)
        if "token" in data:
            value = data["token"]
            return _token_auth(value) if value.startswith(("token:", "file:")) else TokenAuth(value)
        if "file" in data:
            return TokenAuth.from_file(_file_path(data["file"]))
        raise AuthConfigError("token auth params JSON needs a 'token' or 'file' key")
    return TokenAuth(text)


def auth_from_plugin(plugin: str | None, params: str | None) -> AuthProvider | None:
    """Build a provider from ``--auth-plugin`` / ``--auth-params``; None when no auth."""
    name = (plugin or "").strip()
    if name in NO_AUTH_PLUGINS:
        if params:
            # pulsar-admin needs a plugin to use params; a bare token is the common intent
            return _token_auth(params)
        return None
    if name in TOKEN_PLUGINS:
        if not params:
            raise AuthConfigError("token auth needs --auth-params token:<jwt> or file:<path>")
        return _token_auth(params)
    if name in BASIC_PLUGINS:
        data = _parse_params(params or "")
        user = data.get("userId") or data.get("user") or ""
        return BasicAuth(user, data.get("password", ""))
    if name in TLS_PLUGINS:
        data = _parse_params(params or "")
        if "tlsCertFile" not in data or "tlsKeyFile" not in data:
            raise AuthConfigError("TLS auth needs tlsCertFile:<pem>,tlsKeyFile:<pem>")
        return TlsAuth(data["tlsCertFile"], data["tlsKeyFile"])
    raise AuthConfigError(
        f"unsupported auth plugin '{name}': use AuthenticationToken, AuthenticationBasic or AuthenticationTls"
    )
