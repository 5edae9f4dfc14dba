"""Resources ``cpu`` (throttled) and ``disk`` (working directory capped) in the process runtime,
both refused in the thread runtime; measured on the instance processes with psutil."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from magnetar.functions.limits import ResourceWatchdog
from tests.functions.conftest import admin, wait_for, wait_running

BURN = """
import time


def burn(value):
    end = time.time() + float(value)  # a wall-clock deadline: throttled, it still spins to it
    while time.time() < end:
        pass
    return None
"""

FILL = """
import os


def fill(value):
    with open("blob.bin", "ab") as f:  # relative: the instance's working directory
        f.write(os.urandom(2 * 1024 * 1024))
    return None
"""

PROCESS = '{"runtime": "process"}'
THREAD = '{"runtime": "thread"}'


def _status(sa, name):
    return httpx.get(f"{sa.web_url}/admin/v3/functions/public/default/{name}/status", timeout=10).json()


def _create(sa, name, code, classname, src, *extra, runtime=PROCESS, check=True):
    return admin(
        sa, "functions", "create", "--name", name, "--py", str(code), "--classname", classname,
        "--inputs", src, "--custom-runtime-options", runtime, *extra, check=check,
    )  # fmt: skip


def test_cpu_watchdog_throttles_a_spinning_process():
    """The throttle on a bare spinner, at a cap below any fair share even on a loaded machine."""
    spin = [sys.executable, "-c", "while True: pass"]
    limited, free = subprocess.Popen(spin), subprocess.Popen(spin)
    dog = ResourceWatchdog(limited.pid, {"cpu": 0.05}, Path("."))

    async def measure():
        task = asyncio.create_task(dog.run())
        await asyncio.sleep(0.5)
        c0, t0 = {p.pid: _cpu(p.pid) for p in (limited, free)}, time.monotonic()
        await asyncio.sleep(3.0)
        use = {p.pid: (_cpu(p.pid) - c0[p.pid]) / (time.monotonic() - t0) for p in (limited, free)}
        dog.release()
        task.cancel()
        return use[limited.pid], use[free.pid]

    try:
        lim, unl = asyncio.run(measure())
    finally:
        for p in (limited, free):
            p.kill()
            p.wait()
    print(f"cores used: cpu=0.05 -> {lim:.3f}, unlimited -> {unl:.3f}; frozen {dog.frozen_s:.2f} s")
    assert lim <= 0.08 and dog.frozen_s > 1.0 and unl > lim


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def test_cpu_throttled_in_process_runtime_refused_in_thread(fn_standalone, client, unique, tmp_path):
    code = tmp_path / "burner.py"
    code.write_text(BURN)
    src = f"persistent://public/default/burn-{unique}"
    r = _create(fn_standalone, f"burn-t-{unique}", code, "burner.burn", src, "--cpu", "0.5",
                runtime=THREAD, check=False)  # fmt: skip
    assert r.returncode == 1 and "resources.cpu cannot be enforced in the thread runtime" in r.stderr
    limited, free = f"burn-q-{unique}", f"burn-f-{unique}"
    _create(fn_standalone, limited, code, "burner.burn", src, "--cpu", "0.25")
    _create(fn_standalone, free, code, "burner.burn", src)  # both subscribe: each gets the message
    pids = {n: wait_running(fn_standalone, n)["instances"][0]["status"]["pid"] for n in (limited, free)}
    client.create_producer(src).send(b"10")

    def busy():  # both are spinning
        t0 = {n: _cpu(p) for n, p in pids.items()}
        time.sleep(0.5)
        return all(_cpu(p) - t0[n] > 0.02 for n, p in pids.items())

    wait_for(busy, 15, "both instances busy")
    t0, c0 = time.monotonic(), {n: _cpu(p) for n, p in pids.items()}
    stopped = dict.fromkeys(pids, 0)
    while time.monotonic() - t0 < 3.0:  # sampling whether each is held by SIGSTOP (state T)
        for n, p in pids.items():
            stopped[n] += psutil.Process(p).status() == psutil.STATUS_STOPPED
        time.sleep(0.05)
    wall = time.monotonic() - t0
    use = {n: (_cpu(p) - c0[n]) / wall for n, p in pids.items()}
    print(f"cores used over {wall:.1f} s: {use}; samples stopped: {stopped}")
    assert use[limited] <= 0.35, use
    assert stopped[free] == 0, stopped
    if use[free] > 0.4:  # the machine had room for more than the cap (idle: about 1.0 against 0.25)
        assert stopped[limited] > 0 and use[free] > use[limited] + 0.1, (use, stopped)
    # stopping a throttled instance is prompt (it is resumed to see its SIGTERM)
    t0 = time.monotonic()
    admin(fn_standalone, "functions", "delete", "--name", limited)
    admin(fn_standalone, "functions", "delete", "--name", free)
    assert not psutil.pid_exists(pids[limited]) or psutil.Process(pids[limited]).status() == "zombie"
    assert time.monotonic() - t0 < 25


def test_disk_enforced_in_process_runtime_refused_in_thread(fn_standalone, client, unique, tmp_path):
    code = tmp_path / "filler.py"
    code.write_text(FILL)
    name, src = f"fill-{unique}", f"persistent://public/default/fill-{unique}"
    disk = str(5 * 1024 * 1024)
    r = _create(
        fn_standalone, f"{name}-t", code, "filler.fill", src, "--disk", disk, runtime=THREAD, check=False
    )
    assert r.returncode == 1 and "resources.disk cannot be enforced in the thread runtime" in r.stderr
    r = _create(fn_standalone, f"{name}-x", code, "filler.fill", src, "--disk", "-1", check=False)
    assert r.returncode == 1 and "resources.disk must be a positive number" in r.stderr
    _create(fn_standalone, name, code, "filler.fill", src, "--disk", disk)
    wait_running(fn_standalone, name)
    got = admin(fn_standalone, "-o", "json", "functions", "get", "--name", name).stdout
    assert f'"disk": {disk}' in got
    producer = client.create_producer(src)
    producer.send(b"1")
    producer.send(b"2")  # 4 MiB: under the limit

    def processed(n):
        return lambda: (
            (s := _status(fn_standalone, name)["instances"][0]["status"])["numSuccessfullyProcessed"] >= n
            and s
        )

    wait_for(processed(2), 20, "two files written")
    time.sleep(1.5)  # a disk check has seen 4 MiB
    assert _status(fn_standalone, name)["instances"][0]["status"]["numRestarts"] == 0
    producer.send(b"3")  # 6 MiB: over

    def killed():
        s = _status(fn_standalone, name)["instances"][0]["status"]
        return s if "exceeded resources.disk" in s["error"] and s["numRestarts"] >= 1 else None

    s = wait_for(killed, 30, "the instance killed for its disk")
    assert "in its working directory" in s["error"]
    # restarted with an emptied working directory: it runs again (the unacknowledged 3rd write redone)
    wait_for(lambda: _status(fn_standalone, name)["instances"][0]["status"]["running"], 30, "running again")
    admin(fn_standalone, "functions", "delete", "--name", name)
