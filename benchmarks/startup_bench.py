"""`magnetar standalone`: time from spawn to its ready line, and resident memory when idle.

Starts the real CLI subprocess (fresh data dir, port 0) ``--runs`` times and prints for
each: seconds to the ``magnetar ready:`` line, RSS (VmRSS) and peak RSS (VmHWM) after
``--idle-s`` seconds idle, then the latency of the first admin request (``GET
/admin/v2/tenants``: what building the FastAPI admin app on first use costs, ``web.front``)
and the RSS after it; then the medians.  ``--importtime`` prints the slowest imports of one
start (``python -X importtime``, cumulative microseconds) instead.  ``--src DIR`` runs the
``magnetar`` package found under ``DIR`` (e.g. ``git archive main src | tar -x -C /tmp/base``)
instead of this checkout's: base and branch measured back to back, ``--alternate`` runs
(this checkout, DIR) in turns.

Byte code: an installed package has its ``.pyc`` files (pip compiles them); an editable
checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (as this machine's shells set it) compiles
every module from source on every start, which more than doubles the start-up CPU.  So the
bench compiles the ``magnetar`` sources first (``compileall``, into ``__pycache__``, which git
ignores) unless ``--no-compile`` asks for the from-source figure.

    .venv/bin/python benchmarks/startup_bench.py [--runs 3] [--idle-s 3] [--importtime] [--no-compile]
        [--src DIR [--alternate]]
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
import urllib.request


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


def first_admin_s(web_url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"{web_url}/admin/v2/tenants", timeout=120) as r:
        r.read()
        if r.status != 200:
            raise SystemExit(f"first admin request answered {r.status}")
    return time.perf_counter() - t0


def one_run(
    idle_s: float, importtime: bool, src: str | None = None
) -> tuple[float, float, float, float, str, float, float]:
    """(ready s, idle RSS, peak RSS, CPU to ready, stderr, first admin s, RSS after it)"""
    data = tempfile.mkdtemp(prefix="startup-bench-")
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.path.join(src, "src") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable]
    if importtime:
        cmd += ["-X", "importtime"]
    cmd += ["-m", "magnetar.cli.main", "standalone", "--data-dir", data]
    cmd += ["--broker-port", "0", "--web-port", "0", "--advertised-address", "127.0.0.1"]
    cmd += ["--bind-address", "127.0.0.1"]
    err_file = tempfile.TemporaryFile()  # a file, not a pipe: -X importtime writes a lot
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, stdin=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.startswith(b"magnetar ready:"):
                break
        else:
            raise SystemExit("standalone exited before its ready line")
        ready_s = time.perf_counter() - t0
        ready_cpu_s = cpu_s(proc.pid)
        web_url = raw.decode().split()[3]
        time.sleep(idle_s)
        rss, peak = rss_mib(proc.pid)
        admin_s = first_admin_s(web_url)
        rss_after_admin = rss_mib(proc.pid)[0]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
    err_file.seek(0)
    err = err_file.read().decode(errors="replace")
    err_file.close()
    return ready_s, rss, peak, ready_cpu_s, err, admin_s, rss_after_admin


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
    ap.add_argument("--src", help="a checkout (or `git archive` of src/) whose magnetar package to run")
    ap.add_argument("--alternate", action="store_true", help="with --src: this checkout and --src in turns")
    args = ap.parse_args()
    if not args.no_compile:
        import compileall

        import magnetar

        compileall.compile_dir(os.path.dirname(magnetar.__file__), quiet=1)
        if args.src:
            compileall.compile_dir(os.path.join(args.src, "src", "magnetar"), quiet=1)
    if args.importtime:
        ready_s, rss, peak, _, err, _, _ = one_run(args.idle_s, True, args.src)
        print(f"ready in {ready_s:.2f} s (slower under -X importtime); idle RSS {rss:.1f} MiB")
        print_importtime(err, args.top)
        return
    variants = [("this", None), ("src", args.src)] if args.src and args.alternate else [("run", args.src)]
    results: dict[str, list[tuple[float, ...]]] = {name: [] for name, _ in variants}
    for i in range(args.runs):
        for name, src in variants:
            r = one_run(args.idle_s, False, src)
            row = (r[0], r[1], r[2], r[3], r[5], r[6])
            results[name].append(row)
            print(
                f"{name} {i + 1}: ready {row[0]:.2f} s (CPU {row[3]:.2f} s), idle RSS {row[1]:.1f} MiB, "
                f"peak RSS {row[2]:.1f} MiB; first admin request {row[4]:.2f} s, RSS after {row[5]:.1f} MiB "
                f"(load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    for name, rows in results.items():
        med = [statistics.median(x[k] for x in rows) for k in range(6)]
        print(
            f"{name} median of {len(rows)}: ready {med[0]:.2f} s (CPU {med[3]:.2f} s), idle RSS {med[1]:.1f} MiB, "
            f"peak RSS {med[2]:.1f} MiB; first admin request {med[4]:.2f} s, RSS after {med[5]:.1f} MiB"
        )


if __name__ == "__main__":
    main()
