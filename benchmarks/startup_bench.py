"""`magnetar standalone`: time from spawn to its ready line, and resident memory when idle.

Starts the real CLI subprocess (fresh data dir, port 0) ``--runs`` times and prints for
each: seconds to the ``magnetar ready:`` line, RSS (VmRSS) and peak RSS (VmHWM) after
``--idle-s`` seconds idle; then the medians.  ``--importtime`` prints the slowest imports
of one start (``python -X importtime``, cumulative microseconds) instead.

Byte code: an installed package has its ``.pyc`` files (pip compiles them); an editable
checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (as this machine's shells set it) compiles
every module from source on every start, which more than doubles the start-up CPU.  So the
bench compiles the ``magnetar`` sources first (``compileall``, into ``__pycache__``, which git
ignores) unless ``--no-compile`` asks for the from-source figure.

    .venv/bin/python benchmarks/startup_bench.py [--runs 3] [--idle-s 3] [--importtime] [--no-compile]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def rss_mib(pid: int) -> tuple[float, float]:
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    kib = lambda k: int(fields[k].split()[0]) / 1024  # noqa: E731
    return kib("VmRSS"), kib("VmHWM")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process used so far (less noisy than wall time on a
    shared machine)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(idle_s: float, importtime: bool) -> tuple[float, float, float, float, str]:
    data = tempfile.mkdtemp(prefix="startup-bench-")
    cmd = [sys.executable]
    if importtime:
        cmd += ["-X", "importtime"]
    cmd += ["-m", "magnetar.cli.main", "standalone", "--data-dir", data]
    cmd += ["--broker-port", "0", "--web-port", "0", "--advertised-address", "127.0.0.1"]
    cmd += ["--bind-address", "127.0.0.1"]
    err_file = tempfile.TemporaryFile()  # a file, not a pipe: -X importtime writes a lot
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.startswith(b"magnetar ready:"):
                break
        else:
            raise SystemExit("standalone exited before its ready line")
        ready_s = time.perf_counter() - t0
        ready_cpu_s = cpu_s(proc.pid)
        time.sleep(idle_s)
        rss, peak = rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
    err_file.seek(0)
    err = err_file.read().decode(errors="replace")
    err_file.close()
    return ready_s, rss, peak, ready_cpu_s, err


def print_importtime(stderr: str, top: int) -> None:
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|", 2)
        rows.append((int(cum_us), int(self_us), name.strip()))
    rows.sort(reverse=True)
    print(f"{'cumulative ms':>13} {'self ms':>8}  module")
    for cum, own, name in rows[:top]:
        print(f"{cum / 1000:>13.1f} {own / 1000:>8.1f}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=3.0)
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true", help="do not compileall the sources first")
    args = ap.parse_args()
    if not args.no_compile:
        import compileall

        import magnetar

        compileall.compile_dir(os.path.dirname(magnetar.__file__), quiet=1)
    if args.importtime:
        ready_s, rss, peak, _, err = one_run(args.idle_s, True)
        print(f"ready in {ready_s:.2f} s (slower under -X importtime); idle RSS {rss:.1f} MiB")
        print_importtime(err, args.top)
        return
    results = []
    for i in range(args.runs):
        r = one_run(args.idle_s, False)[:4]
        results.append(r)
        print(
            f"run {i + 1}: ready {r[0]:.2f} s (CPU {r[3]:.2f} s), idle RSS {r[1]:.1f} MiB, peak RSS {r[2]:.1f} MiB",
            flush=True,
        )
    med = [statistics.median(x[k] for x in results) for k in range(4)]
    print(
        f"median of {args.runs}: ready {med[0]:.2f} s (CPU {med[3]:.2f} s), idle RSS {med[1]:.1f} MiB, "
        f"peak RSS {med[2]:.1f} MiB"
    )


if __name__ == "__main__":
    main()
