"""Memory and CPU of a process read from /proc, for the memory benchmarks.

Theory of operation: ``/proc/<pid>/status`` has the resident set (``VmRSS``, in kB) and
``/proc/<pid>/stat`` the user + system CPU ticks; ``pid`` may be ``"self"`` (this process,
``topic_memory_inproc.py``) or a child's id (``topic_memory_bench.py``'s standalone).  A
Python process keeps freed memory in its arenas, so RSS is an upper bound -- what an
operator sees.  Linux only, as the benchmarks are.
"""

from __future__ import annotations

import os
import time


def rss_bytes(pid: int | str = "self") -> int:
    """The resident set of ``pid`` in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def cpu_s(pid: int | str = "self") -> float:
    """User + system CPU seconds used by ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int | str, seconds: float) -> tuple[int, float]:
    """RSS after ``seconds`` of quiet, and the CPU % (of one core) used meanwhile."""
    c0 = cpu_s(pid)
    time.sleep(seconds)
    return rss_bytes(pid), (cpu_s(pid) - c0) / seconds * 100
