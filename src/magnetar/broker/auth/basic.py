"""Basic authentication from an htpasswd-style file (``AuthenticationProviderBasic``).

Theory of operation: ``basicAuthConf`` names the file (a path, ``file:`` URL,
``data:`` URL or bare base64 of its content).  Each line is ``user:hash``;
blank lines and ``#`` comments are skipped.  Two hash schemes are checked:

* bcrypt (``$2y$``, ``$2b$``, ``$2a$``; ``htpasswd -B``) with the ``bcrypt`` package;
* Apache MD5 (``$apr1$``; ``htpasswd -m``), implemented in :func:`apr1_md5`
  from the published md5crypt algorithm (magic ``$apr1$``, 1000 rounds).

Lines with any other scheme (DES crypt, ``{SHA}``, plaintext) are kept as
"unsupported": their user cannot log in and is told why, instead of the
whole broker refusing to start.

Clients send ``user:password`` as ``auth_data`` (binary protocol) or
``Authorization: Basic base64(user:password)`` (HTTP; the service decodes
it).  The user name ends at the first ``:``.  A bcrypt check costs tens of
milliseconds on purpose, so the provider says ``blocking = True`` and the
service runs it on an executor.  Comparisons are constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from magnetar.broker.auth.config import AuthConfig, read_key_source
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
from magnetar.broker.auth.providers import AuthResult, Credentials, decode_text

APR1_MAGIC = "$apr1$"
BCRYPT_PREFIXES = ("$2y$", "$2b$", "$2a$")
_ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MAX_USERS = 100_000


def apr1_md5(password: bytes, salt: bytes) -> str:
    """Apache's ``$apr1$`` MD5-crypt of ``password`` with ``salt`` (at most 8 bytes used)."""
    magic = APR1_MAGIC.encode()
    salt = salt.split(b"$", 1)[0][:8]
    ctx = bytearray(password + magic + salt)
    alt = hashlib.md5(password + salt + password).digest()
    remaining = len(password)
    while remaining > 0:
        ctx += alt[: min(16, remaining)]
        remaining -= 16
    i = len(password)
    while i:
        ctx += b"\x00" if i & 1 else password[:1]
        i >>= 1
    digest = hashlib.md5(ctx).digest()
    for rnd in range(1000):
        step = bytearray()
        step += password if rnd & 1 else digest
        if rnd % 3:
            step += salt
        if rnd % 7:
            step += password
        step += digest if rnd & 1 else password
        digest = hashlib.md5(step).digest()
    out = []
    for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)):
        out.append(_to64((digest[a] << 16) | (digest[b] << 8) | digest[c], 4))
    out.append(_to64(digest[11], 2))
    return APR1_MAGIC + salt.decode("ascii", "replace") + "$" + "".join(out)


def _to64(value: int, count: int) -> str:
    chars = []
    for _ in range(count):
        chars.append(_ITOA64[value & 0x3F])
        value >>= 6
    return "".join(chars)


@dataclass(frozen=True, slots=True)
class HtpasswdEntry:
    user: str
    hash: str

    @property
    def scheme(self) -> str:
        if self.hash.startswith(APR1_MAGIC):
            return "apr1"
        if self.hash.startswith(BCRYPT_PREFIXES):
            return "bcrypt"
        return "unsupported"

    def check(self, password: str) -> bool:
        pw = password.encode("utf-8")
        if self.scheme == "apr1":
            salt = self.hash[len(APR1_MAGIC) :].split("$", 1)[0].encode("ascii", "replace")
            return hmac.compare_digest(apr1_md5(pw, salt).encode(), self.hash.encode())
        if self.scheme == "bcrypt":
            try:
                import bcrypt  # only with a bcrypt htpasswd entry

                return bcrypt.checkpw(pw[:72], self.hash.encode("ascii"))
            except (ValueError, UnicodeEncodeError):
                return False
        return False


def parse_htpasswd(text: str) -> dict[str, HtpasswdEntry]:
    users: dict[str, HtpasswdEntry] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            raise AuthConfigError(f"basicAuthConf line {lineno}: expected user:hash")
        if len(users) >= MAX_USERS:
            raise AuthConfigError(f"basicAuthConf has more than {MAX_USERS} users")
        users[user] = HtpasswdEntry(user, hashed.strip())
    return users


class BasicProvider:
    method_name = "basic"
    blocking = True  # bcrypt is deliberately slow: run on an executor

    def __init__(self, users: dict[str, HtpasswdEntry]) -> None:
        self._users = users

    @classmethod
    def from_config(cls, cfg: AuthConfig) -> BasicProvider:
        if not cfg.basic_auth_conf:
            raise AuthConfigError("basic authentication needs basicAuthConf")
        data = read_key_source(cfg.basic_auth_conf, "basicAuthConf")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthConfigError("basicAuthConf is not UTF-8 text") from None
        return cls(parse_htpasswd(text))

    @classmethod
    def from_text(cls, text: str) -> BasicProvider:
        return cls(parse_htpasswd(text))

    def authenticate(self, creds: Credentials) -> AuthResult:
        text = decode_text(creds.auth_data, "the basic credentials")
        user, sep, password = text.partition(":")
        if not sep or not user:
            raise AuthenticationError("Failed to authenticate: basic credentials must be user:password")
        entry = self._users.get(user)
        if entry is None:
            raise AuthenticationError("Failed to authenticate: unknown user or wrong password")
        if entry.scheme == "unsupported":
            raise AuthenticationError(
                "Failed to authenticate: the password hash of this user uses an unsupported scheme "
                "(use bcrypt or $apr1$)"
            )
        if not entry.check(password):
            raise AuthenticationError("Failed to authenticate: unknown user or wrong password")
        return AuthResult(role=user, method=self.method_name)
