"""Fixtures for the compat suite: the official ``pulsar-client`` against a real
``magnetar standalone`` subprocess.

One standalone per test session (starting it is the slow part); every test uses
its own unique topic names, so tests do not see each other's messages.  The
helpers themselves live in :mod:`magnetar.testing.standalone`.
"""

from __future__ import annotations

import pytest

from magnetar.testing.standalone import StandaloneProcess, serving, stop_after_last_user, unique_topic

try:  # not a module-level importorskip: that would also skip the codec's golden-frame tests here
    import pulsar
except ImportError:  # pragma: no cover - the official client is in the test extra
    pulsar = None

# Short client timeouts keep a failing test from hanging for the client's 30 s default.
OPERATION_TIMEOUT_S = 10


def _pulsar_logger():
    # The C++ client's own console logger: a Python ``logging`` logger would be called from the
    # client's threads and can abort the interpreter at exit ("terminate called without an
    # active exception"), turning a green run into a crash.
    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


@pytest.fixture(scope="session")
def standalone(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if pulsar is None:
        pytest.skip("the official pulsar-client is not installed (it is in the test extra)")
    served = serving(StandaloneProcess(tmp_path_factory.mktemp("compat") / "data"))
    proc = next(served)
    stop_after_last_user(request, proc.terminate)  # not idle through the later directories
    yield proc
    yield from served  # the kit's teardown: it must have exited 0


def make_client(service_url: str, **kwargs):
    return pulsar.Client(
        service_url,
        operation_timeout_seconds=kwargs.pop("operation_timeout_seconds", OPERATION_TIMEOUT_S),
        logger=_pulsar_logger(),
        **kwargs,
    )


@pytest.fixture
def client(standalone):
    c = make_client(standalone.broker_url)
    yield c
    c.close()


@pytest.fixture
def http_client(standalone):
    c = make_client(standalone.web_url)
    yield c
    c.close()


@pytest.fixture
def topic(request) -> str:
    """A fresh topic name per test (persistent://public/default/...)."""
    return unique_topic(request.node.name, 60)
