"""Security configuration: one frozen model read from Pulsar's key names.

Theory of operation: :class:`AuthConfig` holds every authentication,
authorization and TLS switch the broker and the web service need, under
Pulsar's own key names (``authenticationEnabled``, ``superUserRoles``,
``tokenSecretKey``, ...).  :meth:`AuthConfig.from_properties` takes any mapping
of key -> value -- the raw ``key=value`` pairs of a ``broker.conf`` or
``BrokerConfig.as_properties()``, whose ``extra`` map carries these keys while
the broker config does not model them -- and converts and checks each value,
raising :class:`AuthConfigError` naming the key.

``authenticationProviders`` lists Java class names in Pulsar; we map the
ones we implement to their method names (``token``, ``tls``, ``basic``) and
also accept the short names.  Naming a provider we do not implement (SASL,
Athenz, OpenID) is a configuration error, not a silent downgrade.

Key material is named the way Pulsar names it (:func:`read_key_source`):
``data:;base64,<b64>``, ``data:,<raw>``, ``file:///path``, a plain path to an
existing file, or a bare base64 string.  Reading a file is blocking I/O: key
sources are resolved once, when the providers are built at startup.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from magnetar.broker.auth.errors import AuthConfigError

# Pulsar provider class -> our method name (the name clients send in CONNECT).
PROVIDER_CLASSES = {
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": "tls",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
}
KNOWN_METHODS = ("token", "tls", "basic")

# Our bound on credentials: a JWT or a user:password line is far smaller than this.
DEFAULT_MAX_AUTH_DATA_BYTES = 64 * 1024

_B64_RE = re.compile(r"[A-Za-z0-9+/_-]+=*")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


@dataclass(frozen=True, slots=True)
class AuthConfig:
    authentication_enabled: bool = False
    authentication_providers: tuple[str, ...] = ()  # method names: token / tls / basic
    authentication_refresh_check_seconds: int = 60
    authorization_enabled: bool = False
    authorization_allow_wildcards_matching: bool = False
    super_user_roles: frozenset[str] = frozenset()
    proxy_roles: frozenset[str] = frozenset()
    anonymous_user_role: str | None = None
    authenticate_original_auth_data: bool = False
    # --- token provider
    token_secret_key: str | None = None
    token_public_key: str | None = None
    token_public_alg: str = "RS256"
    token_auth_claim: str = "sub"
    token_audience_claim: str = "aud"
    token_audience: str | None = None
    # --- basic provider
    basic_auth_conf: str | None = None
    # --- TLS
    tls_certificate_file_path: str | None = None
    tls_key_file_path: str | None = None
    tls_trust_certs_file_path: str | None = None
    tls_require_trusted_client_cert_on_connect: bool = False
    tls_allow_insecure_connection: bool = False
    tls_protocols: tuple[str, ...] = ()
    tls_ciphers: tuple[str, ...] = ()
    broker_service_port_tls: int | None = None
    web_service_port_tls: int | None = None
    # --- ours: the largest credential we look at (CONNECT auth_data, Authorization header)
    max_auth_data_bytes: int = DEFAULT_MAX_AUTH_DATA_BYTES

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> AuthConfig:
        """Build from Pulsar keys; absent or empty values keep the defaults."""
        kw: dict[str, Any] = {}
        for key, (name, kind) in _KEYS.items():
            raw = props.get(key)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            kw[name] = _convert(key, raw, kind)
        if "authentication_providers" in kw:
            kw["authentication_providers"] = tuple(
                _provider_method(p) for p in kw["authentication_providers"]
            )
        cfg = cls(**kw)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        for key, port in (
            ("brokerServicePortTls", self.broker_service_port_tls),
            ("webServicePortTls", self.web_service_port_tls),
        ):
            if port is not None and not 0 <= port <= 65535:
                raise AuthConfigError(f"{key} must be a port number 0..65535, got {port}")
        if self.max_auth_data_bytes <= 0:
            raise AuthConfigError("maxAuthDataBytes must be positive")
        if self.authentication_refresh_check_seconds <= 0:
            raise AuthConfigError("authenticationRefreshCheckSeconds must be positive")
        if self.tls_enabled and not (self.tls_certificate_file_path and self.tls_key_file_path):
            raise AuthConfigError("a TLS port is set but tlsCertificateFilePath / tlsKeyFilePath are missing")
        if self.tls_require_trusted_client_cert_on_connect and not self.tls_trust_certs_file_path:
            raise AuthConfigError("tlsRequireTrustedClientCertOnConnect needs tlsTrustCertsFilePath")

    @property
    def tls_enabled(self) -> bool:
        return self.broker_service_port_tls is not None or self.web_service_port_tls is not None


# Pulsar key -> (field, kind)
_KEYS: dict[str, tuple[str, str]] = {
    "authenticationEnabled": ("authentication_enabled", "bool"),
    "authenticationProviders": ("authentication_providers", "list"),
    "authenticationRefreshCheckSeconds": ("authentication_refresh_check_seconds", "int"),
    "authorizationEnabled": ("authorization_enabled", "bool"),
    "authorizationAllowWildcardsMatching": ("authorization_allow_wildcards_matching", "bool"),
    "superUserRoles": ("super_user_roles", "set"),
    "proxyRoles": ("proxy_roles", "set"),
    "anonymousUserRole": ("anonymous_user_role", "str"),
    "authenticateOriginalAuthData": ("authenticate_original_auth_data", "bool"),
    "tokenSecretKey": ("token_secret_key", "str"),
    "tokenPublicKey": ("token_public_key", "str"),
    "tokenPublicAlg": ("token_public_alg", "str"),
    "tokenAuthClaim": ("token_auth_claim", "str"),
    "tokenAudienceClaim": ("token_audience_claim", "str"),
    "tokenAudience": ("token_audience", "str"),
    "basicAuthConf": ("basic_auth_conf", "str"),
    "tlsCertificateFilePath": ("tls_certificate_file_path", "str"),
    "tlsKeyFilePath": ("tls_key_file_path", "str"),
    "tlsTrustCertsFilePath": ("tls_trust_certs_file_path", "str"),
    "tlsRequireTrustedClientCertOnConnect": ("tls_require_trusted_client_cert_on_connect", "bool"),
    "tlsAllowInsecureConnection": ("tls_allow_insecure_connection", "bool"),
    "tlsProtocols": ("tls_protocols", "list"),
    "tlsCiphers": ("tls_ciphers", "list"),
    "brokerServicePortTls": ("broker_service_port_tls", "int"),
    "webServicePortTls": ("web_service_port_tls", "int"),
    "maxAuthDataBytes": ("max_auth_data_bytes", "int"),
}
# Every key AuthConfig reads (the process warns once about keys no component reads).
KNOWN_KEYS = frozenset(_KEYS)


def _convert(key: str, raw: Any, kind: str) -> Any:
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        low = str(raw).strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise AuthConfigError(f"bad value for {key}: {raw!r} (expected true or false)")
    if kind == "int":
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise AuthConfigError(f"bad value for {key}: {raw!r} (expected an integer)") from None
    if kind in ("list", "set"):
        items = raw if isinstance(raw, list | tuple | set | frozenset) else str(raw).split(",")
        parts = tuple(str(p).strip() for p in items if str(p).strip())
        return frozenset(parts) if kind == "set" else parts
    return str(raw).strip()


def _provider_method(name: str) -> str:
    if name in PROVIDER_CLASSES:
        return PROVIDER_CLASSES[name]
    if name.lower() in KNOWN_METHODS:
        return name.lower()
    raise AuthConfigError(
        f"authentication provider {name!r} is not supported "
        f"(supported: {', '.join(sorted(PROVIDER_CLASSES))} or token/tls/basic)"
    )


def read_key_source(source: str, what: str = "key") -> bytes:
    """Resolve a Pulsar key setting (``data:``, ``file:``, a path, or base64) to bytes."""
    text = source.strip()
    if text.startswith("data:"):
        header, sep, body = text[5:].partition(",")
        if not sep:
            raise AuthConfigError(f"{what}: malformed data: URL (no ',')")
        if header.endswith(";base64"):
            return _b64(body, what)
        return urllib.parse.unquote_to_bytes(body)
    if text.startswith("file:"):
        parsed = urllib.parse.urlparse(text)
        return _read_file(urllib.parse.unquote(parsed.path), what)
    if Path(text).is_file():
        return _read_file(text, what)
    try:
        return _b64(text, what)
    except AuthConfigError:
        raise AuthConfigError(f"{what}: {text!r} is neither an existing file nor base64 data") from None


def _b64(body: str, what: str) -> bytes:
    compact = "".join(body.split())
    if not compact or not _B64_RE.fullmatch(compact):
        raise AuthConfigError(f"{what}: not valid base64")
    padded = compact.rstrip("=")
    padded += "=" * (-len(padded) % 4)
    try:
        if "-" in padded or "_" in padded:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise AuthConfigError(f"{what}: not valid base64") from None


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise AuthConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
