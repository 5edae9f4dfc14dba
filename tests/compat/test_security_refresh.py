"""Token expiry and refresh through AUTH_CHALLENGE with the official client.

A standalone checks every second (``authenticationRefreshCheckSeconds=1``) whether
a connection's credentials expired; it then sends AUTH_CHALLENGE and the client
answers with fresh credentials from its token supplier.  A client whose
supplier keeps answering with fresh tokens stays connected past the first
token's expiry and loses no message.  The supplier being asked again shows the
broker came back for credentials (a challenge; a dropped connection's reconnect
would also ask, which this test does not tell apart).
"""

from __future__ import annotations

import threading
import time
import uuid

import jwt
import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")

SECRET = b"refresh-secret-0123456789abcdef0123456789"
LIFETIME_S = 2


@pytest.fixture(scope="module")
def refreshing(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("refresh")
    (base / "secret.key").write_bytes(SECRET)
    conf = base / "standalone.conf"
    conf.write_text(
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
        f"tokenSecretKey=file://{base / 'secret.key'}\n"
        "authenticationRefreshCheckSeconds=1\n"
        "authorizationEnabled=true\nsuperUserRoles=admin\n"
    )
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


def short_token() -> str:
    return jwt.encode({"sub": "admin", "exp": int(time.time()) + LIFETIME_S}, SECRET, "HS256")


def test_supplier_refreshes_an_expiring_token_on_challenge(refreshing) -> None:
    calls = []
    lock = threading.Lock()

    def supplier() -> str:
        with lock:
            calls.append(time.monotonic())
        return short_token()

    c = pulsar.Client(
        refreshing.broker_url,
        authentication=pulsar.AuthenticationToken(supplier),
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        topic = f"persistent://public/default/refresh-{uuid.uuid4().hex[:8]}"
        consumer = c.subscribe(topic, "s")
        producer = c.create_producer(topic)
        first = len(calls)
        sent = []
        deadline = time.monotonic() + 3 * LIFETIME_S + 2
        i = 0
        while time.monotonic() < deadline:
            producer.send(f"m{i}".encode())
            sent.append(f"m{i}")
            i += 1
            time.sleep(0.5)
        got = [consumer.receive(10_000).data().decode() for _ in sent]
        assert got == sent
        assert len(calls) > first, "the broker never challenged for fresh credentials"
    finally:
        c.close()
