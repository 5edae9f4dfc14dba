"""A real ZooKeeper for tests: find it, start it on a free loopback port, stop it.

Theory of operation: Debian's ``zookeeper`` package puts the server jar in
``/usr/share/java/zookeeper.jar`` (its manifest's Class-Path names the
dependencies) and ``.ci/run`` installs the package.  :class:`ZooKeeperServer`
writes a ``zoo.cfg`` in its own directory (short tickTime so tests can use
1-2 s session timeouts), starts ``ZooKeeperServerMain`` as a subprocess and
waits until it answers ``ruok`` with ``imok``.  ``stop``/``start`` keep the
data directory, so a test can take the server away past a session timeout and
bring it back; ``expire_session`` expires a client's session on demand with
ZooKeeper's classic trick (a second client on the same session id and
password closes it).

pytest: ``zookeeper_server_fixture`` below (fixture name ``zookeeper_server``;
import it into a test module) hands every module the same server, started
once per pytest run (JVM starts are slow on small machines).  When Java or the jar is
missing the fixture skips with the reason -- except under ``CI=true`` (the CI
machine installs both; see ``.ci/run``), where a ZooKeeper that is missing or
cannot start FAILS the test: a CI run that silently skipped the ZooKeeper tests
would prove nothing.  MAGNETAR_ZK_JAR / MAGNETAR_JAVA override the locations.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import pytest

from magnetar.app.zookeeper_server import (  # noqa: F401 -- re-exported for tests
    DEFAULT_JARS,
    START_TIMEOUT_S,
    TICK_MS,
    ZooKeeperServer,
    find_zookeeper,
    four_letter,
    free_port,
)


def expire_session_blocking(hosts: str, client_id: tuple[int, bytes], timeout_s: float = 10.0) -> None:
    """Expires a session from outside: attach a second client to it, then close that client."""
    from kazoo.client import KazooClient

    intruder = KazooClient(hosts=hosts, client_id=client_id, timeout=timeout_s)
    intruder.start(timeout=timeout_s)
    intruder.stop()
    intruder.close()


async def expire_session(store: object, timeout_s: float = 10.0) -> None:
    """Expires the session of a :class:`~magnetar.metadata.zookeeper.ZKMetadataStore`."""
    import asyncio

    client_id = store.kazoo_client_id  # type: ignore[attr-defined]
    hosts = store.hosts  # type: ignore[attr-defined]
    assert client_id is not None, "store has no session"
    await asyncio.to_thread(expire_session_blocking, hosts, client_id, timeout_s)


_SERVER_KEY = pytest.StashKey[ZooKeeperServer]()


@pytest.fixture(scope="module", name="zookeeper_server")
def zookeeper_server_fixture(request: pytest.FixtureRequest) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper per pytest run, shared by every module that imports this fixture.

    It lives in the pytest config's stash (not a global) and stops when the run
    ends.  A test that stops it must start it again before it returns.
    """
    require_zookeeper()
    server = request.config.stash.get(_SERVER_KEY, None)
    if server is None:
        server = ZooKeeperServer()
        request.config.add_cleanup(server.close)
        request.config.stash[_SERVER_KEY] = server
    server.start()  # no-op when running; installed but failing to start is a failure, not a skip
    yield server


def require_zookeeper() -> None:
    """Skips the test when Java or the ZooKeeper jar is missing -- fails it under ``CI=true``."""
    found = find_zookeeper()
    if isinstance(found, str):
        if in_ci():
            pytest.fail(f"ZooKeeper unavailable under CI=true: {found}", pytrace=False)
        pytest.skip(f"ZooKeeper unavailable: {found}")


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    """True under ``CI=true`` (GitHub Actions, GitLab and most CI systems set it)."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")
