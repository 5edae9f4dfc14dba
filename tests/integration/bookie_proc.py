"""Helpers to run `magnetar bookie` as a real subprocess in tests."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class BookieProcess:
    proc: asyncio.subprocess.Process
    bookie_id: str
    port: int
    log_path: str

    async def kill9(self) -> None:
        self.proc.kill()
        await self.proc.wait()

    async def terminate(self, timeout_s: float = 20) -> int:
        self.proc.terminate()
        return await asyncio.wait_for(self.proc.wait(), timeout_s)


async def start_bookie(
    data_dir: str, port: int, metadata_url: str, *, config: str | None = None, extra: list[str] | None = None
) -> BookieProcess:
    """Start and wait for the ready line; raises RuntimeError (with the log) if it exits instead."""
    os.makedirs(data_dir, exist_ok=True)
    log_path = os.path.join(data_dir, f"bookie-{port}.log")
    args = [sys.executable, "-m", "magnetar.cli.main", "bookie", "--data-dir", data_dir, "--port", str(port)]
    args += ["--metadata-url", metadata_url]
    if config:
        args += ["--config", config]
    args += extra or []
    log_file = _open_log(log_path)
    try:
        proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=log_file)
    finally:
        log_file.close()
    assert proc.stdout is not None
    try:
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            if not line:
                code = await proc.wait()
                raise RuntimeError(f"bookie exited with {code}: {_tail(log_path)}")
            text = line.decode().strip()
            if text.startswith("magnetar bookie ready:"):
                return BookieProcess(proc, text.split(":", 1)[1].strip(), port, log_path)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"bookie did not become ready: {_tail(log_path)}") from None


def _open_log(path: str):  # type: ignore[no-untyped-def]
    return open(path, "ab")  # handed to the child, closed right after the spawn


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        return f.read()[-3000:].decode(errors="replace")
