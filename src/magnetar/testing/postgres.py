"""A throw-away PostgreSQL server for tests: Debian's ``postgresql`` started with initdb/pg_ctl.

Theory of operation: :class:`PostgresServer` finds the server binaries
(``/usr/lib/postgresql/*/bin``), creates a cluster in a fresh temporary directory with
``initdb`` (trust authentication, user ``postgres``), and runs it on a free
port on 127.0.0.1 with its socket in the same directory.  PostgreSQL refuses
to run as root, so when the test runs as root the directory is handed to the
``postgres`` system user (created by the Debian package) and every command runs
as that user through ``runuser``.  ``stop()``/``start()`` restart the server on
the same port and data (what a sink must survive); ``close()`` stops it.
:func:`postgres_unavailable_reason` says why it cannot run here (the tests
skip with that reason, and fail under ``CI=true``, where ``.ci/run`` installs
the package).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

START_TIMEOUT_S = 60


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def postgres_unavailable_reason() -> str | None:
    if _bin_dir() is None:
        return "PostgreSQL server binaries not found (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        bindir = _bin_dir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed")
        self.bin = bindir
        # Not under pytest's tmp dir: pytest keeps its root 0700 (and re-applies that when any
        # pytest run starts), which locks the postgres user out.
        self.dir = Path(tempfile.mkdtemp(prefix="magnetar-pg-"))
        self.data = self.dir / "pgdata"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {r.stdout}\n{r.stderr}")

    def init(self) -> PostgresServer:
        if self.as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        return self

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.dir / "server.log"), "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def close(self) -> None:
        try:
            self.stop("immediate")
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
