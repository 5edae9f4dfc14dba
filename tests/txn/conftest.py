"""Fixtures for the transaction tests: a real ``magnetar standalone`` subprocess with
``transactionCoordinatorEnabled=true`` (two coordinators), one per test module.

Every test uses its own topic names, so tests in a module do not see each other's messages.
"""

from __future__ import annotations

import uuid

import pytest
from txn_helpers import txn_standalone

from magnetar.testing.standalone import broker_unavailable_reason


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = txn_standalone(tmp_path_factory.mktemp("txn"))
    proc.start()
    yield proc
    code = proc.terminate()
    assert code == 0, f"standalone exited {code}; log tail:\n{proc.log_tail()}"


@pytest.fixture
def topic(request) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:40]
    return f"persistent://public/default/{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def client(txn_broker):
    from magnetar.client import Client

    c = Client(txn_broker.broker_url, operation_timeout_seconds=10)
    yield c
    await c.close()
