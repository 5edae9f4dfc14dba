"""Token refresh: the broker's AUTH_CHALLENGE is answered on the same connection with a fresh token."""

from __future__ import annotations

import asyncio
import time

import jwt
import pytest

from magnetar.client import AuthenticationToken, Client
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

SECRET = b"nc-refresh-secret-0123456789abcdef0123456789"
LIFETIME_S = 2


async def test_supplier_answers_challenges_without_reconnecting(tmp_path):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    (tmp_path / "secret.key").write_bytes(SECRET)
    conf = tmp_path / "standalone.conf"
    conf.write_text(
        "authenticationEnabled=true\n"
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
        f"tokenSecretKey=file://{tmp_path / 'secret.key'}\n"
        "authenticationRefreshCheckSeconds=1\n"
    )
    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    proc.start()
    calls = []

    def supplier() -> str:
        calls.append(time.time())
        return jwt.encode({"sub": "user", "exp": int(time.time()) + LIFETIME_S}, SECRET, "HS256")

    client = Client(proc.broker_url, authentication=AuthenticationToken(supplier))
    try:
        topic = "persistent://public/default/refresh-me"
        consumer = await client.subscribe(topic, "s")
        producer = await client.create_producer(topic, batching_enabled=False)
        first = client.pool.connections[0]
        for i in range(8):  # 4 s: past two token lifetimes
            await producer.send(str(i).encode())
            await asyncio.sleep(0.5)
        got = [(await consumer.receive(5000)).data() for _ in range(8)]
        assert got == [str(i).encode() for i in range(8)]
        assert len(calls) >= 2, "the broker never came back for credentials"
        assert client.pool.connections == [first] and not first.is_closed  # answered, not reconnected
    finally:
        await client.close()
        proc.terminate()
