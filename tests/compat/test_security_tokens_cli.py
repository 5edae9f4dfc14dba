"""``magnetar tokens`` keys and tokens used by the official client against a standalone subprocess.

For RS256 and ES256: ``magnetar tokens create-key-pair`` makes the pair, the
standalone verifies with ``tokenPublicKey`` (+ ``tokenPublicAlg``), ``magnetar
tokens create`` signs a token for the super-user, and the official client
produces and consumes with it.  A token signed by another private key of the
same kind is refused with AuthenticationError.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")


def tokens(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", "tokens", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def key_pair(directory, alg: str, name: str) -> tuple[str, str]:
    priv, pub = directory / f"{name}.key", directory / f"{name}.pub"
    tokens("create-key-pair", "-a", alg, "--output-private-key", str(priv), "--output-public-key", str(pub))
    return str(priv), str(pub)


def attempt(url: str, tok: str) -> str:
    c = pulsar.Client(
        url,
        authentication=pulsar.AuthenticationToken(tok),
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        topic = f"persistent://public/default/cli-{uuid.uuid4().hex[:8]}"
        consumer = c.subscribe(topic, "s")
        c.create_producer(topic).send(b"signed")
        return consumer.receive(10_000).data().decode()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    finally:
        c.close()


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_cli_key_pair_and_token_with_the_official_client(tmp_path, alg) -> None:
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    priv, pub = key_pair(tmp_path, alg, "broker")
    other_priv, _ = key_pair(tmp_path, alg, "other")
    conf = tmp_path / "standalone.conf"
    conf.write_text(
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
        f"tokenPublicKey=file://{pub}\n"
        f"tokenPublicAlg={alg}\n"
        "authorizationEnabled=true\nsuperUserRoles=admin\n"
    )
    good = tokens("create", "-pk", f"file://{priv}", "-s", "admin", "-e", "1h")
    forged = tokens("create", "-pk", f"file://{other_priv}", "-s", "admin")
    assert "admin" in tokens("validate", "-i", good, "-pk", f"file://{pub}")

    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    proc.start()
    try:
        assert attempt(proc.broker_url, good) == "signed"
        assert attempt(proc.broker_url, forged) == "AuthenticationError"
        assert attempt(proc.broker_url, good) == "signed"
    finally:
        assert proc.terminate() == 0, proc.log_tail()
