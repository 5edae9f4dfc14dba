"""AuthenticationService: picks the provider for a credential and runs it.

Theory of operation: the service holds one provider per configured method
(``authenticationProviders``) and answers two questions:

* binary protocol -- :meth:`AuthenticationService.authenticate` with the
  ``auth_method_name`` and ``auth_data`` of ``CONNECT`` (or ``AUTH_RESPONSE``)
  and, on a TLS connection, the peer certificate;
* HTTP -- :meth:`AuthenticationService.authenticate_http` with the request
  headers (``Authorization: Bearer <jwt>`` -> token, ``Authorization: Basic
  <b64>`` -> basic, otherwise the TLS client certificate) and the optional
  ``X-Pulsar-Auth-Method-Name`` hint.

Rules, as Pulsar has them:

* authentication disabled: everyone passes with a null role;
* a method no provider claims (including ``none``, what a client without
  credentials sends) gets ``anonymousUserRole`` when one is configured, and is
  refused otherwise;
* a known method with bad credentials is refused -- it never falls back to the
  anonymous role (Pulsar's HTTP filter does fall back; we refuse, so a wrong
  password is an error and not a silent downgrade).

Limits: credentials longer than ``max_auth_data_bytes`` are refused before any
parsing; providers marked ``blocking`` (bcrypt) run on a BlockingExecutor,
at most ``max_blocking_in_flight`` at once -- beyond that the attempt is
refused with TooManyRequests instead of queueing without bound.
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from collections.abc import Mapping
from typing import Any

from magnetar.broker.auth.basic import BasicProvider
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
from magnetar.broker.auth.providers import (
    ANONYMOUS_METHOD,
    NO_AUTH_METHOD,
    AuthenticationProvider,
    AuthResult,
    Credentials,
    TlsProvider,
)
from magnetar.broker.auth.tls import PeerCert
from magnetar.broker.auth.token import TokenProvider
from magnetar.broker.errors import BrokerError, TooManyRequestsError
from magnetar.runtime.clock import Clock
from magnetar.runtime.offload import BlockingExecutor

AUTH_METHOD_HEADER = "x-pulsar-auth-method-name"
MAX_METHOD_NAME_CHARS = 64


def build_providers(cfg: AuthConfig, clock: Clock) -> dict[str, AuthenticationProvider]:
    """One provider per configured method (reads key files: call at startup)."""
    out: dict[str, AuthenticationProvider] = {}
    for method in cfg.authentication_providers:
        if method == "token":
            out[method] = TokenProvider.from_config(cfg, clock)
        elif method == "basic":
            out[method] = BasicProvider.from_config(cfg)
        elif method == "tls":
            out[method] = TlsProvider()
        else:  # config.py maps names; this is a guard against a new name
            raise AuthConfigError(f"no provider for authentication method {method!r}")
    return out


class AuthenticationService:
    def __init__(
        self,
        config: AuthConfig,
        providers: Mapping[str, AuthenticationProvider],
        *,
        executor: BlockingExecutor | None = None,
        max_blocking_in_flight: int = 64,
    ) -> None:
        if config.authentication_enabled and not providers and config.anonymous_user_role is None:
            raise AuthConfigError(
                "authenticationEnabled=true needs authenticationProviders or anonymousUserRole"
            )
        self.config = config
        self._providers = dict(providers)
        self.outcomes: Counter[tuple[str, str, str]] = Counter()  # (success|failure, method, reason)
        self._own_executor = executor is None
        self._executor = executor or BlockingExecutor("auth", max_threads=2)
        self._max_blocking_in_flight = max_blocking_in_flight
        self._blocking_in_flight = 0

    @classmethod
    def from_config(
        cls,
        config: AuthConfig,
        clock: Clock,
        executor: BlockingExecutor | None = None,
        extra_providers: Mapping[str, AuthenticationProvider] | None = None,
    ) -> AuthenticationService:
        """``extra_providers``: plugin providers by method name (broker.plugins)."""
        providers = build_providers(config, clock) if config.authentication_enabled else {}
        if config.authentication_enabled and extra_providers:
            providers.update(extra_providers)
        return cls(config, providers, executor=executor)

    @property
    def enabled(self) -> bool:
        return self.config.authentication_enabled

    def provider(self, method_name: str) -> AuthenticationProvider | None:
        return self._providers.get(method_name)

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self._providers)

    async def authenticate(
        self, method_name: str | None, auth_data: bytes, tls_peer_cert: PeerCert | None = None
    ) -> AuthResult:
        """CONNECT / AUTH_RESPONSE: the role for this method and data, or AuthenticationError."""
        return await self._counted(method_name, self._authenticate(method_name, auth_data, tls_peer_cert))

    async def _counted(self, method: str | None, attempt: Any) -> AuthResult:
        """Count outcomes for pulsar_authentication_{success,failures}_total (by method, reason)."""
        try:
            result = await attempt
        except BrokerError as exc:
            self.outcomes[
                ("failure", (method or NO_AUTH_METHOD)[:MAX_METHOD_NAME_CHARS], type(exc).__name__)
            ] += 1
            raise
        if self.enabled:
            self.outcomes[("success", result.method, "")] += 1
        return result

    async def _authenticate(
        self, method_name: str | None, auth_data: bytes, tls_peer_cert: PeerCert | None = None
    ) -> AuthResult:
        method = method_name or NO_AUTH_METHOD
        if not self.enabled:
            return AuthResult(role=None, method=method)
        self._check_size(len(auth_data))
        provider = self._providers.get(method)
        if provider is None:
            return self._anonymous(method)
        return await self._run(provider, Credentials(bytes(auth_data), tls_peer_cert))

    async def authenticate_http(
        self, headers: Mapping[str, str], tls_peer_cert: PeerCert | None = None
    ) -> AuthResult:
        """An HTTP request: Authorization header (Bearer / Basic) or the TLS client certificate."""
        scheme = next((v for k, v in headers.items() if k.lower() == "authorization"), "").partition(" ")[0]
        return await self._counted(scheme.lower() or None, self._authenticate_http(headers, tls_peer_cert))

    async def _authenticate_http(
        self, headers: Mapping[str, str], tls_peer_cert: PeerCert | None = None
    ) -> AuthResult:
        if not self.enabled:
            return AuthResult(role=None, method=NO_AUTH_METHOD)
        lower = {k.lower(): v for k, v in headers.items()}
        value = lower.get("authorization", "").strip()
        self._check_size(len(value))
        hint = lower.get(AUTH_METHOD_HEADER, "").strip().lower() or None
        method, data = self._http_credentials(value, tls_peer_cert, hint)
        provider = self._providers.get(method) if method else None
        if provider is None:
            return self._anonymous(method or NO_AUTH_METHOD)
        return await self._run(provider, Credentials(data, tls_peer_cert, from_http=True))

    def _http_credentials(
        self, value: str, peer: PeerCert | None, hint: str | None
    ) -> tuple[str | None, bytes]:
        scheme, _, rest = value.partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer":
            return hint or "token", rest.strip().encode()
        if scheme == "basic":
            try:
                decoded = base64.b64decode(rest.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise AuthenticationError(
                    "Failed to authenticate: Basic credentials are not base64"
                ) from None
            return hint or "basic", decoded
        if value:
            if hint in self._providers:
                return hint, value.encode()
            raise AuthenticationError("Failed to authenticate: unsupported Authorization scheme")
        if hint == "tls" or (hint is None and peer is not None and "tls" in self._providers):
            return "tls", b""
        return hint, b""

    def _anonymous(self, method: str) -> AuthResult:
        role = self.config.anonymous_user_role
        if role:
            return AuthResult(role=role, method=ANONYMOUS_METHOD)
        shown = method[:MAX_METHOD_NAME_CHARS]
        raise AuthenticationError(
            f"No anonymous role, and no authentication provider configured for method {shown!r}"
        )

    def _check_size(self, size: int) -> None:
        if size > self.config.max_auth_data_bytes:
            raise AuthenticationError(
                f"Failed to authenticate: credentials of {size} bytes exceed the limit of "
                f"{self.config.max_auth_data_bytes} bytes"
            )

    async def _run(self, provider: AuthenticationProvider, creds: Credentials) -> AuthResult:
        if not getattr(provider, "blocking", False):
            return provider.authenticate(creds)
        if self._blocking_in_flight >= self._max_blocking_in_flight:
            raise TooManyRequestsError("too many authentication attempts in progress; retry later")
        self._blocking_in_flight += 1
        try:
            return await self._executor.run(provider.authenticate, creds)
        finally:
            self._blocking_in_flight -= 1

    def statistics(self) -> dict[str, Any]:
        return {"methods": list(self._providers), "blocking_in_flight": self._blocking_in_flight}

    async def aclose(self) -> None:
        if self._own_executor:
            await self._executor.aclose()
