"""Basic provider: htpasswd with bcrypt ($2y$/$2b$) and Apache MD5 ($apr1$, checked against openssl)."""

from __future__ import annotations

import base64
import shutil
import subprocess

import bcrypt
import pytest

from magnetar.broker.auth.basic import BasicProvider, apr1_md5, parse_htpasswd
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
from magnetar.broker.auth.providers import Credentials

# Verified with `openssl passwd -apr1 -salt SALT PASSWORD` (OpenSSL 3) when this test was written.
APR1_VECTORS = [
    (b"Secret!1", b"saltsalt", "$apr1$saltsalt$dppVfKz7ojA/3aRpObiqY/"),
    (b"a-much-longer-password-than-sixteen-bytes", b"ab", "$apr1$ab$vCRbZwmfS.hgWzhQUeJHd1"),
    (b"", b"xyz", "$apr1$xyz$Pix4eE3fQHxJjb6LqtyMK1"),
]


@pytest.mark.parametrize(("password", "salt", "expected"), APR1_VECTORS)
def test_apr1_known_vectors(password: bytes, salt: bytes, expected: str) -> None:
    assert apr1_md5(password, salt) == expected


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not on PATH")
@pytest.mark.parametrize("password", ["p", "pässwörd", "x" * 33, "with:colon"])
def test_apr1_matches_openssl(password: str) -> None:
    out = subprocess.run(
        ["openssl", "passwd", "-apr1", "-salt", "Zq9.x/Ab", password],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    assert apr1_md5(password.encode(), b"Zq9.x/Ab") == out


def _bcrypt(password: str, prefix: bytes = b"2b") -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4, prefix=prefix)).decode()


@pytest.fixture
def provider() -> BasicProvider:
    text = "\n".join(
        [
            "# users",
            f"alice:{apr1_md5(b'alice-pw', b'k3yS4lt.')}",
            f"bob:{_bcrypt('bob-pw')}",
            f"carol:{_bcrypt('carol:pw').replace('$2b$', '$2y$', 1)}",  # htpasswd -B writes $2y$
            "dave:plaintext-or-des",
            "",
        ]
    )
    return BasicProvider.from_text(text)


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "alice-pw"), ("bob", "bob-pw"), ("carol", "carol:pw")]
)
def test_good_passwords(provider: BasicProvider, user: str, password: str) -> None:
    result = provider.authenticate(Credentials(f"{user}:{password}".encode()))
    assert (result.role, result.method, result.expires_at_ms) == (user, "basic", None)


@pytest.mark.parametrize(
    "data",
    [
        b"alice:wrong",
        b"bob:",
        b"bob:bob-pw ",
        b"nobody:x",
        b"alice",
        b":alice-pw",
        b"",
        b"\xff\xfe:x",
        b"bob:" + b"b" * 200,
    ],
)
def test_bad_credentials_are_refused(provider: BasicProvider, data: bytes) -> None:
    with pytest.raises(AuthenticationError):
        provider.authenticate(Credentials(data))


def test_unsupported_hash_scheme_says_so(provider: BasicProvider) -> None:
    with pytest.raises(AuthenticationError, match="unsupported scheme"):
        provider.authenticate(Credentials(b"dave:plaintext-or-des"))


def test_from_config_file_and_base64(tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = f"erin:{apr1_md5(b'pw', b'salt')}\n"
    f = tmp_path / ".htpasswd"
    f.write_text(text)
    for conf in (str(f), f"file://{f}", base64.b64encode(text.encode()).decode()):
        p = BasicProvider.from_config(AuthConfig(basic_auth_conf=conf))
        assert p.authenticate(Credentials(b"erin:pw")).role == "erin"
    with pytest.raises(AuthConfigError):
        BasicProvider.from_config(AuthConfig())


def test_malformed_htpasswd_line_is_a_config_error() -> None:
    with pytest.raises(AuthConfigError, match="line 2"):
        parse_htpasswd("ok:$apr1$a$b\nno-colon-here\n")
