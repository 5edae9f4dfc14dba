"""Fixtures for the transaction tests: a real ``magnetar standalone`` subprocess with
``transactionCoordinatorEnabled=true`` (two coordinators), one per test module.

Every test uses its own topic names, so tests in a module do not see each other's messages.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

TXN_CONFIG = """\
transactionCoordinatorEnabled=true
magnetarTransactionCoordinatorCount=2
magnetarTransactionTimeoutCheckIntervalMs=100
transactionBufferSnapshotMinTimeInMillis=1000
"""


def txn_standalone(base: Path, extra: str = "") -> StandaloneProcess:
    conf = base / "txn.conf"
    conf.write_text(TXN_CONFIG + extra)
    return StandaloneProcess(base / "data", config_file=conf)


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
