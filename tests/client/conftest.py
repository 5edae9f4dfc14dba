"""Fixtures for the native client's tests: one real ``magnetar standalone`` subprocess per session.

Every test uses its own topic names, so tests do not see each other's messages.
The official ``pulsar-client`` (test extra) is used only by the interoperability tests.
"""

from __future__ import annotations

import pytest

from magnetar.testing.standalone import StandaloneProcess, serving, stop_after_last_user, unique_topic


@pytest.fixture(scope="session")
def standalone(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    served = serving(StandaloneProcess(tmp_path_factory.mktemp("nativeclient") / "data"))
    proc = next(served)
    stop_after_last_user(request, proc.terminate)  # not idle through the later directories
    yield proc
    yield from served  # the kit's teardown: it must have exited 0


@pytest.fixture
def topic(request) -> str:
    return unique_topic(request.node.name, 50)


@pytest.fixture
async def client(standalone):
    from magnetar.client import Client

    c = Client(standalone.broker_url, operation_timeout_seconds=10)
    yield c
    await c.close()
