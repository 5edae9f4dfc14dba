"""``python -m magnetar.functions.instance_main SPEC.json``: one function instance as a process.

Theory of operation: the process runtime writes a spec (the function config,
instance id, code path, broker and web URLs, where to write stats, the
client credentials of ``functions.auth``) and starts
this module.  It runs one :class:`~magnetar.functions.instance.FunctionInstance`
on its own event loop, writes the instance's stats to the stats file every
second (write to a temporary name, then rename, so a reader never sees half a
file), stops when its parent (the worker) is gone -- even after a kill -9 of
the worker no orphan keeps consuming -- and on SIGTERM stops the instance
cleanly (pending outputs flushed and acknowledged) and exits 0.  A failure exits 1 with the reason on stderr; the
runtime restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from magnetar.functions.auth import ClientAuth
from magnetar.functions.config import parse_function_config
from magnetar.functions.instance import FunctionInstance, InstanceStats
from magnetar.functions.state import HttpStateClient

STATS_INTERVAL_S = 1.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _write_stats(path: Path, stats: InstanceStats) -> None:
    doc = stats.to_json()
    doc["pid"] = os.getpid()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


async def _main(spec: dict) -> None:
    config = parse_function_config(spec["config"])
    stats = InstanceStats()
    auth = ClientAuth.from_json(spec.get("auth"))
    state_url = spec.get("state_url") or spec["web_url"]
    state = HttpStateClient(state_url, config.fqfn, headers=auth.http_headers())
    instance = FunctionInstance(
        config, int(spec["instance_id"]), spec["code_path"], spec["broker_url"], state,
        stats=stats, web_url=spec["web_url"], auth=auth,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, instance.stop)
    loop.add_signal_handler(signal.SIGINT, instance.stop)
    stats_path = Path(spec["stats_path"])

    async def report() -> None:
        while True:
            with contextlib.suppress(OSError):
                _write_stats(stats_path, stats)
            await asyncio.sleep(STATS_INTERVAL_S)

    parent = int(spec.get("parent_pid") or 0)

    async def watch_parent() -> None:
        # The worker's death (even kill -9) must not leave this instance running unsupervised.
        while parent and os.getppid() == parent:  # noqa: ASYNC110 -- polling another process
            await asyncio.sleep(STATS_INTERVAL_S)
        if parent:
            instance.stop()

    reporter = loop.create_task(report())
    watchdog = loop.create_task(watch_parent())
    try:
        await instance.run()
    finally:
        reporter.cancel()
        watchdog.cancel()
        await asyncio.gather(reporter, watchdog, return_exceptions=True)
        with contextlib.suppress(OSError):
            _write_stats(stats_path, stats)
        state.close()


def _resume_on_parent_death() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGCONT), 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m magnetar.functions.instance_main SPEC.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _resume_on_parent_death()
    spec = json.loads(Path(args[0]).read_text())
    try:
        asyncio.run(_main(spec))
    except Exception as exc:
        print(f"function instance failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
