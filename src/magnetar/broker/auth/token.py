"""JWT token authentication (``AuthenticationProviderToken``).

Theory of operation: the client sends a compact JWT (``auth_method_name`` =
``token``, ``auth_data`` = the token; over HTTP ``Authorization: Bearer <jwt>``).
We verify its signature with the configured key:

* ``tokenSecretKey``: an HMAC secret; HS256 (and HS384/HS512) tokens.
* otherwise ``tokenPublicKey`` (PEM or DER, RSA or EC) with ``tokenPublicAlg``
  (default RS256; ES256 etc. for EC keys).

Only the algorithms matching the key are accepted, so ``alg: none`` and the
HMAC-with-a-public-key confusion are refused.  The role is the string claim
named by ``tokenAuthClaim`` (default ``sub``).  With ``tokenAudience`` set, the
``tokenAudienceClaim`` claim (default ``aud``; a string or a list) must name it.

Time comes from the injected clock, not from the library: ``exp`` (when
present) must be in the future and ``nbf`` in the past, with no leeway, as
Pulsar does.  The expiry goes out in ``AuthResult.expires_at_ms`` so the
connection can challenge the client for a fresh token before it runs out
(``session.py``).  Every way a token can be bad ends in AuthenticationError.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker.auth.config import AuthConfig, read_key_source
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
from magnetar.broker.auth.providers import AuthResult, Credentials, decode_text
from magnetar.runtime.clock import Clock

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
PUBLIC_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512")
BEARER_PREFIX = "Bearer "


def load_public_key(data: bytes) -> Any:
    """An RSA/EC public key from PEM or DER (``pulsar tokens create-key-pair`` writes DER)."""
    from cryptography.hazmat.primitives import serialization  # only with token auth: ~10 MiB

    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError) as exc:
        raise AuthConfigError(f"tokenPublicKey is not a usable public key: {exc}") from None


def load_private_key(data: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise AuthConfigError(f"not a usable private key: {exc}") from None


class TokenProvider:
    method_name = "token"

    def __init__(
        self,
        clock: Clock,
        *,
        secret_key: bytes | None = None,
        public_key: Any = None,
        public_alg: str = "RS256",
        role_claim: str = "sub",
        audience_claim: str = "aud",
        audience: str | None = None,
    ) -> None:
        if secret_key is not None:
            if not secret_key:
                raise AuthConfigError("tokenSecretKey is empty")
            self._key: Any = secret_key
            self._algorithms: list[str] = list(HMAC_ALGORITHMS)
        elif public_key is not None:
            if public_alg not in PUBLIC_ALGORITHMS:
                raise AuthConfigError(f"tokenPublicAlg {public_alg!r} is not supported")
            self._key = public_key
            self._algorithms = [public_alg]
        else:
            raise AuthConfigError("token authentication needs tokenSecretKey or tokenPublicKey")
        self._clock = clock
        self._role_claim = role_claim or "sub"
        self._audience_claim = audience_claim or "aud"
        self._audience = audience

    @classmethod
    def from_config(cls, cfg: AuthConfig, clock: Clock) -> TokenProvider:
        common = {
            "role_claim": cfg.token_auth_claim,
            "audience_claim": cfg.token_audience_claim,
            "audience": cfg.token_audience,
        }
        if cfg.token_secret_key:
            return cls(clock, secret_key=read_key_source(cfg.token_secret_key, "tokenSecretKey"), **common)
        if cfg.token_public_key:
            key = load_public_key(read_key_source(cfg.token_public_key, "tokenPublicKey"))
            return cls(clock, public_key=key, public_alg=cfg.token_public_alg, **common)
        raise AuthConfigError("token authentication needs tokenSecretKey or tokenPublicKey")

    def authenticate(self, creds: Credentials) -> AuthResult:
        token = decode_text(creds.auth_data, "the token").strip()
        if token.startswith(BEARER_PREFIX):
            token = token[len(BEARER_PREFIX) :].strip()
        if not token:
            raise AuthenticationError("Failed to authenticate: the token is empty")
        claims = self._verify(token)
        now_ms = self._clock.time_ms()
        expires_at_ms = _time_claim_ms(claims, "exp")
        if expires_at_ms is not None and now_ms >= expires_at_ms:
            raise AuthenticationError(f"Failed to authenticate: the token expired at {expires_at_ms} ms")
        not_before_ms = _time_claim_ms(claims, "nbf")
        if not_before_ms is not None and now_ms < not_before_ms:
            raise AuthenticationError("Failed to authenticate: the token is not valid yet (nbf)")
        self._check_audience(claims)
        role = claims.get(self._role_claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationError(
                f"Failed to authenticate: the token has no role in claim {self._role_claim!r}"
            )
        return AuthResult(role=role, method=self.method_name, expires_at_ms=expires_at_ms)

    def _verify(self, token: str) -> dict[str, Any]:
        import jwt  # imported by the first token verified: a broker without token auth never loads it

        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=self._algorithms,
                options={
                    "verify_signature": True,
                    "verify_exp": False,  # checked against the injected clock
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": False,
                    "verify_iss": False,
                    "verify_sub": False,  # the role claim is checked below, whichever it is
                    "verify_jti": False,
                },
            )
        except jwt.InvalidSignatureError:
            raise AuthenticationError(
                "Failed to authenticate: the token's signature does not verify"
            ) from None
        except jwt.InvalidAlgorithmError:
            raise AuthenticationError(
                f"Failed to authenticate: the token's algorithm is not allowed ({'/'.join(self._algorithms)})"
            ) from None
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"Failed to authenticate: malformed token ({exc})") from None
        except (ValueError, TypeError):
            raise AuthenticationError("Failed to authenticate: malformed token") from None
        if not isinstance(claims, dict):
            raise AuthenticationError("Failed to authenticate: the token's payload is not a JSON object")
        return claims

    def _check_audience(self, claims: dict[str, Any]) -> None:
        if not self._audience:
            return
        aud = claims.get(self._audience_claim)
        names = aud if isinstance(aud, list) else [aud]
        if self._audience not in names:
            raise AuthenticationError(
                f"Failed to authenticate: the token's {self._audience_claim!r} claim does not include "
                f"the broker's audience"
            )


def _time_claim_ms(claims: dict[str, Any], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AuthenticationError(f"Failed to authenticate: the token's {name!r} claim is not a number")
    if not -(2**53) < value < 2**53:
        raise AuthenticationError(f"Failed to authenticate: the token's {name!r} claim is out of range")
    return int(value * 1000)
