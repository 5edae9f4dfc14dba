"""``magnetar tokens``: create-secret-key -> create -> validate, key pairs, bad input."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest

from magnetar.cli.main import main
from magnetar.cli.tokens import parse_expiry_seconds


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    rc = main(["tokens", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_secret_key_round_trip(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    key = tmp_path / "secret.key"
    assert run(capsys, "create-secret-key", "--output", str(key))[0] == 0
    assert len(key.read_bytes()) == 32
    rc, token, _ = run(
        capsys, "create", "--secret-key", f"file://{key}", "--subject", "alice", "--expiry-time", "1h"
    )
    assert rc == 0
    claims = jwt.decode(token.strip(), key.read_bytes(), algorithms=["HS256"])
    assert claims["sub"] == "alice" and 3590 <= claims["exp"] - time.time() <= 3600
    rc, out, _ = run(capsys, "validate", "-i", token.strip(), "--secret-key", f"file://{key}")
    assert rc == 0 and json.loads(out)["sub"] == "alice"
    other = tmp_path / "other.key"
    run(capsys, "create-secret-key", "-o", str(other))
    rc, _, err = run(capsys, "validate", "-i", token.strip(), "--secret-key", str(other))
    assert rc == 1 and "signature" in err


def test_base64_secret_key_as_data_url(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run(capsys, "create-secret-key", "--base64")
    assert rc == 0 and len(base64.b64decode(out)) == 32
    data_url = f"data:;base64,{out.strip()}"
    token = run(capsys, "create", "-sk", data_url, "-s", "bob")[1].strip()
    rc, out2, _ = run(capsys, "validate", "-i", token, "-sk", data_url)
    assert rc == 0 and json.loads(out2) == {"sub": "bob"}
    tf = tmp_path / "token.txt"
    tf.write_text(token + "\n")
    assert run(capsys, "validate", "-f", str(tf), "-sk", data_url)[0] == 0
    assert json.loads(run(capsys, "show", "-i", token)[1]) == {"sub": "bob"}


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_key_pair_round_trip(tmp_path, capsys, alg: str) -> None:  # type: ignore[no-untyped-def]
    priv, pub = tmp_path / "private.key", tmp_path / "public.key"
    rc, _, _ = run(
        capsys,
        "create-key-pair",
        "-a",
        alg,
        "--output-private-key",
        str(priv),
        "--output-public-key",
        str(pub),
    )
    assert rc == 0 and priv.stat().st_mode & 0o077 == 0
    token = run(capsys, "create", "--private-key", f"file://{priv}", "--subject", "svc", "-e", "10m")[
        1
    ].strip()
    assert jwt.get_unverified_header(token)["alg"] == alg
    rc, out, _ = run(capsys, "validate", "-i", token, "--public-key", f"file://{pub}")
    assert rc == 0 and json.loads(out)["sub"] == "svc"
    # a token from another key pair does not validate
    priv2, pub2 = tmp_path / "p2", tmp_path / "q2"
    run(
        capsys,
        "create-key-pair",
        "-a",
        alg,
        "--output-private-key",
        str(priv2),
        "--output-public-key",
        str(pub2),
    )
    assert run(capsys, "validate", "-i", token, "--public-key", str(pub2))[0] == 1


def test_expired_token_does_not_validate(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    key = tmp_path / "k"
    run(capsys, "create-secret-key", "-o", str(key))
    expired = jwt.encode({"sub": "a", "exp": int(time.time()) - 5}, key.read_bytes(), "HS256")
    rc, _, err = run(capsys, "validate", "-i", expired, "-sk", str(key))
    assert rc == 1 and "expired" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["create", "-sk", "file:///no/such/key", "-s", "a"],
        ["create", "-sk", "data:;base64,c2VjcmV0", "-s", "a", "-e", "soon"],
        ["create", "-sk", "data:;base64,c2VjcmV0", "-s", "a", "-a", "RS256"],
        ["create", "-pk", "data:;base64,c2VjcmV0", "-s", "a"],
        ["validate", "-i", "garbage", "-sk", "data:;base64,c2VjcmV0"],
        ["validate", "-f", "/no/such/token", "-sk", "data:;base64,c2VjcmV0"],
        ["show", "-i", "garbage"],
    ],
)
def test_bad_input_is_an_error_message(capsys, argv: list[str]) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = run(capsys, *argv)
    assert rc == 1 and err.startswith("magnetar tokens:")


def test_usage_errors_and_expiry_units(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as info:
        main(["tokens", "create", "-s", "a"])  # no key
    assert info.value.code == 2
    assert [parse_expiry_seconds(x) for x in ("30", "30s", "10m", "2h", "1d", "1w", "1y")] == [
        30,
        30,
        600,
        7200,
        86400,
        604800,
        31536000,
    ]
