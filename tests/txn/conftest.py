"""Fixtures for the transaction tests: a real ``magnetar standalone`` subprocess with
``transactionCoordinatorEnabled=true`` (two coordinators), one per test module.

Every test uses its own topic names, so tests in a module do not see each other's messages.
"""

from __future__ import annotations

import pytest
from txn_helpers import txn_standalone

from magnetar.testing.standalone import serving, unique_topic


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory):
    yield from serving(txn_standalone(tmp_path_factory.mktemp("txn")))


@pytest.fixture
def topic(request) -> str:
    return unique_topic(request.node.name, 40)


@pytest.fixture
async def client(txn_broker):
    from magnetar.client import Client

    c = Client(txn_broker.broker_url, operation_timeout_seconds=10)
    yield c
    await c.close()
