"""``magnetar tokens``: make and check JWT keys and tokens, like ``pulsar tokens``.

Theory of operation: four subcommands, each a small function over pyjwt and
``cryptography``:

* ``create-secret-key [--output F] [--base64]`` -- 32 random bytes for HS256
  (raw, or base64 text with ``--base64``), to a file or stdout;
* ``create-key-pair --output-private-key F --output-public-key F [-a RS256|ES256]``
  -- DER files as Pulsar writes them (PKCS#8 private, X.509 SubjectPublicKeyInfo
  public); PEM input is accepted everywhere a key is read;
* ``create (--secret-key K | --private-key K) --subject ROLE [--expiry-time 1h]``
  -- prints the token;
* ``validate -i TOKEN | -f FILE (--secret-key K | --public-key K)`` -- verifies
  with the broker's own token provider and prints the claims; exit 1 if bad;
* ``show -i TOKEN`` -- prints the claims without verifying.

Keys are named as in ``broker.conf``: ``file:///path``, ``data:;base64,...``,
a plain path, or base64 text.  Bad input is an error message and exit code 1
(2 for usage errors, from argparse), never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import sys
from pathlib import Path
from typing import Any

EXPIRY_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_EXPIRY_RE = re.compile(r"(\d+)\s*([smhdwy]?)")
EC_CURVES = {"ES256": "SECP256R1", "ES384": "SECP384R1", "ES512": "SECP521R1"}


class TokensCliError(Exception):
    pass


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokens", help="create and validate JWT keys and tokens (like pulsar tokens)")
    tsub = p.add_subparsers(dest="tokens_command", metavar="COMMAND")

    sk = tsub.add_parser("create-secret-key", help="a new HMAC secret key")
    sk.add_argument("-o", "--output", help="write to this file (default stdout)")
    sk.add_argument("-b", "--base64", action="store_true", help="base64-encode the key")
    sk.add_argument("-a", "--signature-algorithm", default="HS256", choices=["HS256", "HS384", "HS512"])
    sk.set_defaults(func=_guard(create_secret_key))

    kp = tsub.add_parser("create-key-pair", help="a new RSA or EC key pair")
    kp.add_argument(
        "-a", "--signature-algorithm", default="RS256", choices=["RS256", "ES256", "ES384", "ES512"]
    )
    kp.add_argument("--output-private-key", required=True)
    kp.add_argument("--output-public-key", required=True)
    kp.set_defaults(func=_guard(create_key_pair))

    cr = tsub.add_parser("create", help="a new token")
    keys = cr.add_mutually_exclusive_group(required=True)
    keys.add_argument("-sk", "--secret-key", help="file:///path, data:;base64,..., a path or base64")
    keys.add_argument("-pk", "--private-key", help="file:///path, data:;base64,..., or a path")
    cr.add_argument("-s", "--subject", required=True, help="the role (sub claim)")
    cr.add_argument("-e", "--expiry-time", help="relative expiry, e.g. 30s, 10m, 1h, 2d, 1w, 1y")
    cr.add_argument("-a", "--signature-algorithm", help="default HS256 (secret key) or RS256/ES256 (by key)")
    cr.add_argument("--headers", action="append", default=[], help="extra header key=value")
    cr.set_defaults(func=_guard(create_token))

    va = tsub.add_parser("validate", help="verify a token and print its claims")
    src = va.add_mutually_exclusive_group(required=True)
    src.add_argument("-i", "--token", help="the token")
    src.add_argument("-f", "--token-file", help="file holding the token")
    vkeys = va.add_mutually_exclusive_group(required=True)
    vkeys.add_argument("-sk", "--secret-key")
    vkeys.add_argument("-pk", "--public-key")
    va.add_argument("-a", "--signature-algorithm", help="for a public key (default from the key type)")
    va.set_defaults(func=_guard(validate_token))

    sh = tsub.add_parser("show", help="print a token's claims without verifying")
    ssrc = sh.add_mutually_exclusive_group(required=True)
    ssrc.add_argument("-i", "--token")
    ssrc.add_argument("-f", "--token-file")
    sh.set_defaults(func=_guard(show_token))

    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except TokensCliError as exc:
            print(f"magnetar tokens: {exc}", file=sys.stderr)
            return 1

    return run


# ---------------------------------------------------------------------- commands
def create_secret_key(args: argparse.Namespace) -> int:
    size = {"HS256": 32, "HS384": 48, "HS512": 64}[args.signature_algorithm]
    key = secrets.token_bytes(size)
    data = base64.b64encode(key) if args.base64 else key
    _emit(data, args.output)
    return 0


def create_key_pair(args: argparse.Namespace) -> int:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    alg = args.signature_algorithm
    if alg.startswith("ES"):
        private: Any = ec.generate_private_key(getattr(ec, EC_CURVES[alg])())
    else:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv = private.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(args.output_private_key, priv, private=True)
    _write(args.output_public_key, pub)
    return 0


def create_token(args: argparse.Namespace) -> int:
    import jwt

    from magnetar.runtime.clock import RealClock

    claims: dict[str, Any] = {"sub": args.subject}
    if args.expiry_time:
        claims["exp"] = RealClock().time_ms() // 1000 + parse_expiry_seconds(args.expiry_time)
    headers = dict(_kv(h) for h in args.headers)
    if args.secret_key:
        key: Any = _key_bytes(args.secret_key, "secret key")
        alg = args.signature_algorithm or "HS256"
        if not alg.startswith("HS"):
            raise TokensCliError(f"a secret key signs HS256/HS384/HS512, not {alg}")
    else:
        key = _private_key(args.private_key)
        alg = args.signature_algorithm or _default_alg(key)
    try:
        token = jwt.encode(claims, key, algorithm=alg, headers=headers or None)
    except (jwt.PyJWTError, ValueError, TypeError, NotImplementedError) as exc:
        raise TokensCliError(f"cannot sign with {alg}: {exc}") from None
    print(token)
    return 0


def validate_token(args: argparse.Namespace) -> int:
    import jwt

    from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError
    from magnetar.broker.auth.providers import Credentials
    from magnetar.broker.auth.token import TokenProvider, load_public_key
    from magnetar.runtime.clock import RealClock

    token = _token_arg(args)
    try:
        if args.secret_key:
            provider = TokenProvider(RealClock(), secret_key=_key_bytes(args.secret_key, "secret key"))
        else:
            public = load_public_key(_key_bytes(args.public_key, "public key"))
            alg = args.signature_algorithm or _default_alg(public)
            provider = TokenProvider(RealClock(), public_key=public, public_alg=alg)
        provider.authenticate(Credentials(token.encode()))
    except (AuthenticationError, AuthConfigError) as exc:
        raise TokensCliError(f"invalid token: {exc}") from None
    claims = jwt.decode(token, options={"verify_signature": False})
    print(json.dumps(claims, sort_keys=True))
    return 0


def show_token(args: argparse.Namespace) -> int:
    import jwt

    try:
        claims = jwt.decode(_token_arg(args), options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokensCliError(f"malformed token: {exc}") from None
    print(json.dumps(claims, sort_keys=True))
    return 0


# ---------------------------------------------------------------------- helpers
def parse_expiry_seconds(text: str) -> int:
    m = _EXPIRY_RE.fullmatch(text.strip())
    if not m:
        raise TokensCliError(f"bad expiry time {text!r}: use a number with s, m, h, d, w or y")
    return int(m.group(1)) * EXPIRY_UNITS[m.group(2) or "s"]


def _kv(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise TokensCliError(f"bad header {item!r}: expected key=value")
    return key, value


def _key_bytes(source: str, what: str) -> bytes:
    from magnetar.broker.auth.config import read_key_source
    from magnetar.broker.auth.errors import AuthConfigError

    try:
        return read_key_source(source, what)
    except AuthConfigError as exc:
        raise TokensCliError(str(exc)) from None


def _private_key(source: str) -> Any:
    from magnetar.broker.auth.errors import AuthConfigError
    from magnetar.broker.auth.token import load_private_key

    try:
        return load_private_key(_key_bytes(source, "private key"))
    except AuthConfigError as exc:
        raise TokensCliError(str(exc)) from None


def _default_alg(key: Any) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec

    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name, "ES256")
    return "RS256"


def _token_arg(args: argparse.Namespace) -> str:
    if args.token is not None:
        return args.token.strip()
    try:
        return Path(args.token_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokensCliError(f"cannot read {args.token_file}: {exc}") from None


def _emit(data: bytes, output: str | None) -> None:
    if output:
        _write(output, data, private=True)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _write(path: str, data: bytes, private: bool = False) -> None:
    import os

    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise TokensCliError(f"cannot write {path}: {exc.strerror or exc}") from None
