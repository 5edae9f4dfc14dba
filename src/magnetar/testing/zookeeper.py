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
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

# The first is where Debian's package installs it; .ci/run checks for exactly this path.
DEFAULT_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar")
START_TIMEOUT_S = 60.0
TICK_MS = 200


def find_zookeeper() -> tuple[str, str] | str:
    """(java, classpath) or a human-readable reason why ZooKeeper cannot run here."""
    java = os.environ.get("MAGNETAR_JAVA") or shutil.which("java")
    if not java:
        return "java is not installed (apt-get install default-jre-headless zookeeper)"
    candidates = [os.environ["MAGNETAR_ZK_JAR"]] if os.environ.get("MAGNETAR_ZK_JAR") else list(DEFAULT_JARS)
    for jar in candidates:
        if Path(jar).is_file():
            return java, jar
    return f"ZooKeeper jar not found in {candidates} (apt-get install zookeeper)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def four_letter(port: int, word: str = "ruok", timeout_s: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server process on 127.0.0.1."""

    def __init__(self, workdir: str | None = None, port: int | None = None) -> None:
        found = find_zookeeper()
        if isinstance(found, str):
            raise RuntimeError(found)
        self._java, self._jar = found
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="magnetar-zk-"))
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"zk:{self.hosts}"

    def _write_config(self) -> Path:
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={TICK_MS}",
                    f"dataDir={self.workdir / 'data'}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,cons",
                    f"minSessionTimeout={2 * TICK_MS}",
                    "maxSessionTimeout=60000",
                ]
            )
            + "\n"
        )
        return cfg

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        if self.running:
            return
        cfg = self._write_config()
        log = open(self.workdir / "zookeeper.log", "ab")  # noqa: SIM115 - owned by the process
        cmd = [
            self._java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            self._jar,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(cfg),
        ]
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self._proc.returncode}; see {self.workdir}")
            try:
                if four_letter(self.port).strip() == "imok":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer ruok within {timeout_s}s; see {self.workdir}")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it lingers.  Data stays for a later ``start``."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)


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
    found = find_zookeeper()
    if isinstance(found, str):
        if in_ci():
            pytest.fail(f"ZooKeeper unavailable under CI=true: {found}", pytrace=False)
        pytest.skip(f"ZooKeeper unavailable: {found}")
    server = request.config.stash.get(_SERVER_KEY, None)
    if server is None:
        server = ZooKeeperServer()
        request.config.add_cleanup(server.close)
        request.config.stash[_SERVER_KEY] = server
    server.start()  # no-op when running; installed but failing to start is a failure, not a skip
    yield server


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    """True under ``CI=true`` (GitHub Actions, GitLab and most CI systems set it)."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")
