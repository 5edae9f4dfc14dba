"""Fixtures for the transaction tests: a real ``magnetar standalone`` subprocess with
``transactionCoordinatorEnabled=true`` (two coordinators), one for the modules that use it
(started once, stopped after the last of their tests).

Every test uses its own topic names, so tests do not see each other's messages.
"""

from __future__ import annotations

import pytest
from txn_helpers import txn_standalone

from magnetar.testing.standalone import serving, stop_after_last_user, unique_topic


@pytest.fixture(scope="session")
def txn_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    served = serving(txn_standalone(tmp_path_factory.mktemp("txn")))
    proc = next(served)
    stop_after_last_user(request, proc.terminate)
    yield proc
    yield from served  # the kit's teardown: it must have exited 0


@pytest.fixture
def topic(request) -> str:
    return unique_topic(request.node.name, 40)


@pytest.fixture
async def client(txn_broker):
    from magnetar.client import Client

    c = Client(txn_broker.broker_url, operation_timeout_seconds=10)
    yield c
    await c.close()
