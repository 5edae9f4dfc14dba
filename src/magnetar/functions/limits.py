"""Resource limits of a process-runtime instance: ``cpu`` throttled, ``ram`` and ``disk`` capped.

Theory of operation: one :class:`ResourceWatchdog` per instance process, a
task of the worker's event loop beside the process, enforcing
``FunctionConfig.resources`` without cgroups (no root needed):

* ``cpu`` (cores, may be fractional): a token bucket of CPU time.  Every
  ``CPU_TICK_S`` the watchdog reads the process's CPU time (user + system,
  its children included) with psutil; the bucket gains ``cpu * elapsed``
  and loses what was used, and holds at most ``CPU_BURST_S`` seconds' worth
  of credit.  When the bucket is negative the process is frozen with
  ``SIGSTOP`` until the deficit has refilled (``SIGCONT``), so over any window
  of a second or more the process's average use stays at ``cpu`` cores.
  :meth:`ResourceWatchdog.release` stops throttling (and resumes the
  process) so a stopping instance can handle its ``SIGTERM`` promptly; the
  instance process also asks the kernel for a ``SIGCONT`` when its parent
  dies (``instance_main``), so a worker killed mid-freeze leaves no frozen
  orphan.
* ``ram`` (bytes): the resident set size, every ``RAM_CHECK_S``; over it,
  :meth:`run` returns the reason and the runtime kills the process (as an
  OOM kill would).
* ``disk`` (bytes): the bytes allocated under the instance's scratch
  directory (its working directory and ``TMPDIR``, emptied at each start by
  the runtime), every ``DISK_CHECK_S``, summed in a thread; over it, the
  same as ``ram``.  Files outside it (the shared, size-capped code package,
  the instance's log and stats files) are not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

import psutil

CPU_TICK_S = 0.1
CPU_BURST_S = 0.2  # credit the bucket holds: the largest burst over the average
RAM_CHECK_S = 0.5
DISK_CHECK_S = 1.0
MAX_FREEZE_S = 1.0  # one SIGSTOP never lasts longer; the rest waits for the next tick


def dir_bytes(root: Path) -> int:
    """Bytes allocated on disk under ``root`` (files and directories; symlinks not followed)."""
    total = 0
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return total


class ResourceWatchdog:
    """Enforces ``resources`` (``cpu``, ``ram``, ``disk``) on one instance process."""

    def __init__(self, pid: int, resources: dict[str, Any], scratch: Path) -> None:
        self.pid = pid
        self.cpu = float(resources["cpu"]) if resources.get("cpu") else None
        self.ram = int(resources["ram"]) if resources.get("ram") else None
        self.disk = int(resources["disk"]) if resources.get("disk") else None
        self.scratch = scratch
        self.frozen_s = 0.0  # total time held with SIGSTOP (for the log and tests)
        self._released = False
        self._proc: psutil.Process | None = None

    @property
    def active(self) -> bool:
        return bool(self.cpu or self.ram or self.disk)

    def release(self) -> None:
        """Stop throttling and resume the process (it is being stopped)."""
        self._released = True
        self._resume()

    def _resume(self) -> None:
        if self._proc is not None:  # psutil checks the pid was not reused
            with contextlib.suppress(psutil.Error):
                self._proc.resume()

    async def run(self) -> str:
        """Watch until the process is gone (returns "") or over ``ram``/``disk`` (returns why)."""
        try:
            proc = self._proc = psutil.Process(self.pid)
            cpu_used = _cpu_seconds(proc)
        except psutil.Error:
            return ""
        last = time.monotonic()
        credit = 0.0
        next_ram = next_disk = last
        try:
            while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                now = time.monotonic()
                if self.ram and now >= next_ram:
                    next_ram = now + RAM_CHECK_S
                    rss = proc.memory_info().rss
                    if rss > self.ram:
                        return f"killed: resident memory {rss} bytes exceeded resources.ram {self.ram}"
                if self.disk and now >= next_disk:
                    used = await asyncio.to_thread(dir_bytes, self.scratch)
                    next_disk = time.monotonic() + DISK_CHECK_S
                    if used > self.disk:
                        return (
                            f"killed: {used} bytes on disk in its working directory exceeded "
                            f"resources.disk {self.disk}"
                        )
                if self.cpu and not self._released:
                    total = _cpu_seconds(proc)
                    credit = min(
                        credit + self.cpu * (now - last) - (total - cpu_used), self.cpu * CPU_BURST_S
                    )
                    cpu_used, last = total, now
                    if credit < 0:
                        await self._freeze(min(-credit / self.cpu, MAX_FREEZE_S))
                        continue
                await asyncio.sleep(CPU_TICK_S)
        except psutil.Error:
            return ""
        finally:
            if self.cpu:
                self._resume()
        return ""

    async def _freeze(self, seconds: float) -> None:
        assert self._proc is not None
        self._proc.suspend()  # SIGSTOP
        try:
            await asyncio.sleep(seconds)
        finally:
            self._resume()  # SIGCONT
        self.frozen_s += seconds


def _cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system
