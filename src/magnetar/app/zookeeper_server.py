"""Debian's ZooKeeper as a child process: find it, start it on a loopback port, stop it.

Theory of operation: Debian's ``zookeeper`` package puts the server jar in
``/usr/share/java/zookeeper.jar`` (its manifest's Class-Path names the
dependencies).  :class:`ZooKeeperServer` writes a ``zoo.cfg`` in its own
directory (short tickTime so sessions of 1-2 s are allowed), starts
``ZooKeeperServerMain`` as a subprocess and waits until it answers ``ruok``
with ``imok``.  ``stop``/``start`` keep the data directory.  With
``detach=True`` the server gets its own session (process group), so it
outlives the process that started it: ``magnetar cluster up`` records its pid
and ``magnetar cluster down`` stops it.  The test kit
(:mod:`magnetar.testing.zookeeper`) re-exports these for tests.
MAGNETAR_ZK_JAR / MAGNETAR_JAVA override the locations.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

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

    def __init__(self, workdir: str | None = None, port: int | None = None, *, detach: bool = False) -> None:
        found = find_zookeeper()
        if isinstance(found, str):
            raise RuntimeError(found)
        self._java, self._jar = found
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="magnetar-zk-"))
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.detach = detach

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
        self._proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=self.detach
        )
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
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

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
