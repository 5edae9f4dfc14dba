"""Fixtures for the native client's tests: one real ``magnetar standalone`` subprocess per session.

Every test uses its own topic names, so tests do not see each other's messages.
The official ``pulsar-client`` (test extra) is used only by the interoperability tests.
"""

from __future__ import annotations

import uuid

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = StandaloneProcess(tmp_path_factory.mktemp("nativeclient") / "data")
    proc.start()
    yield proc
    code = proc.terminate()
    assert code == 0, f"standalone exited {code}; log tail:\n{proc.log_tail()}"


@pytest.fixture
def topic(request) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:50]
    return f"persistent://public/default/{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def client(standalone):
    from magnetar.client import Client

    c = Client(standalone.broker_url, operation_timeout_seconds=10)
    yield c
    await c.close()
