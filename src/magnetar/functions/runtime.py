"""Runtimes: where an instance runs -- a thread of the worker, or a process of its own.

Theory of operation: the worker asks a runtime factory for one
:class:`InstanceRuntime` per instance (``parallelism`` of them per function)
and only ever calls ``start``, ``stop``, ``restart`` and ``status`` on it.

* :class:`ThreadRuntime` runs :class:`~magnetar.functions.instance.FunctionInstance`
  as a task of the worker's event loop (the user's code on the instance's own
  thread); its stats are read directly.
* :class:`ProcessRuntime` runs ``python -m magnetar.functions.instance_main``
  with a JSON spec file, one subprocess per instance.  The child writes its stats
  to ``stats.json`` (atomically, every second) and the runtime reads them.

Resources (``FunctionConfig.resources``): the process runtime enforces all
three with a :class:`~magnetar.functions.limits.ResourceWatchdog` beside each
child -- ``cpu`` by throttling it (SIGSTOP/SIGCONT), ``ram`` and ``disk`` by
killing it when over (the status says why, and the supervisor restarts it, as
an OOM kill would).  Each process instance runs in its own scratch directory
(``work/instance-N``, its working directory and ``TMPDIR``, emptied at each
start, as a container's writable layer), which is what ``disk`` measures.  The
thread runtime shares the worker's CPU, memory and directory, so the worker
refuses ``resources`` for it (``functions.worker``).

Both keep a supervisor task that restarts the instance when it dies (a process
exit, or the instance task raising), after a backoff that grows from 1 s to
30 s and resets once the instance has run for a minute; ``numRestarts`` counts
the restarts, the last failure is ``error`` in the status.  ``stop`` ends the
supervisor first, so a stopped instance stays stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from magnetar.functions.auth import NO_AUTH, ClientAuth
from magnetar.functions.config import FunctionConfig
from magnetar.functions.instance import FunctionInstance, InstanceStats
from magnetar.functions.limits import ResourceWatchdog
from magnetar.functions.state import HttpStateClient

log = logging.getLogger(__name__)

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 60.0
STOP_TIMEOUT_S = 10.0


class InstanceRuntime:
    """Supervision shared by both runtimes; subclasses implement ``_run_once``."""

    kind = "base"

    def __init__(
        self, config: FunctionConfig, instance_id: int, code_path: str, broker_url: str, web_url: str,
        work_dir: Path, *, auth: ClientAuth = NO_AUTH, worker_id: str = "standalone",
        state_url: str | None = None,
    ) -> None:  # fmt: skip
        self.state_url = state_url or web_url  # the worker's state API (web_url: the broker's admin)
        self.auth = auth
        self.worker_id = worker_id
        self.config = config
        self.instance_id = instance_id
        self.code_path = code_path
        self.broker_url = broker_url
        self.web_url = web_url
        self.work_dir = work_dir
        self.restarts = 0
        self.error = ""
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self.running:
            return
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(), name=f"function:{self.config.fqfn}:{self.instance_id}"
        )

    async def stop(self) -> None:
        self._stop.set()
        await self._halt()
        if self._task is not None:
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await asyncio.shield(self._task)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            except Exception:
                log.exception(
                    "function instance %s:%d failed while stopping", self.config.fqfn, self.instance_id
                )
            self._task = None

    async def restart(self) -> None:
        await self.stop()
        self.start()

    async def _supervise(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                await self._run_once()
                if self._stop.is_set():
                    return
                self.error = "the instance exited"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "function %s instance %d failed: %s", self.config.fqfn, self.instance_id, self.error
                )
            if time.monotonic() - started > HEALTHY_AFTER_S:
                backoff = BACKOFF_MIN_S
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._stop.wait()
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            if not self._stop.is_set():
                self.restarts += 1

    async def _run_once(self) -> None:
        raise NotImplementedError

    async def _halt(self) -> None:
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    def status(self) -> dict[str, Any]:
        s = self.stats()
        return {
            "instanceId": self.instance_id,
            "status": {
                "running": self.running and bool(s.get("running")),
                "error": s.get("error") or self.error,
                "numRestarts": self.restarts,
                "numReceived": s.get("numReceived", 0),
                "numSuccessfullyProcessed": s.get("numSuccessfullyProcessed", 0),
                "numUserExceptions": s.get("numUserExceptions", 0),
                "latestUserExceptions": s.get("latestUserExceptions", []),
                "numSystemExceptions": s.get("numSystemExceptions", 0),
                "latestSystemExceptions": s.get("latestSystemExceptions", []),
                "averageLatency": s.get("averageLatency", 0.0),
                "lastInvocationTime": s.get("lastInvocationTime", 0),
                "workerId": self.worker_id,
                "runtime": self.kind,
                "pid": s.get("pid"),
            },
        }


class ThreadRuntime(InstanceRuntime):
    kind = "thread"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._instance: FunctionInstance | None = None
        self._stats = InstanceStats()

    async def _run_once(self) -> None:
        state = HttpStateClient(self.state_url, self.config.fqfn, headers=self.auth.http_headers())
        self._stats = InstanceStats()
        self._instance = FunctionInstance(
            self.config, self.instance_id, self.code_path, self.broker_url, state,
            stats=self._stats, web_url=self.web_url, auth=self.auth,
        )  # fmt: skip
        try:
            await self._instance.run()
        finally:
            await asyncio.to_thread(state.close)

    async def _halt(self) -> None:
        if self._instance is not None:
            self._instance.stop()

    def stats(self) -> dict[str, Any]:
        return self._stats.to_json()


class ProcessRuntime(InstanceRuntime):
    kind = "process"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # absolute: the child's working directory is its scratch directory
        self.work_dir, self.code_path = self.work_dir.absolute(), os.path.abspath(self.code_path)
        self._proc: asyncio.subprocess.Process | None = None
        self._watchdog: ResourceWatchdog | None = None
        self._over_limit = ""

    @property
    def stats_path(self) -> Path:
        return self.work_dir / f"instance-{self.instance_id}.stats.json"

    @property
    def scratch_dir(self) -> Path:
        return self.work_dir / f"instance-{self.instance_id}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def _run_once(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        spec = self.work_dir / f"instance-{self.instance_id}.spec.json"
        spec.touch(mode=0o600)  # it may carry the instance's credentials
        spec.write_text(
            json.dumps(
                {
                    "config": self.config.to_json(),
                    "instance_id": self.instance_id,
                    "code_path": self.code_path,
                    "broker_url": self.broker_url,
                    "web_url": self.web_url,
                    "state_url": self.state_url,
                    "stats_path": str(self.stats_path),
                    "parent_pid": os.getpid(),
                    "auth": self.auth.to_json(),
                }
            )
        )
        with contextlib.suppress(FileNotFoundError):
            self.stats_path.unlink()
        scratch = self.scratch_dir
        await asyncio.to_thread(shutil.rmtree, scratch, True)
        (scratch / "tmp").mkdir(parents=True)
        log_file = open(self.work_dir / f"instance-{self.instance_id}.log", "ab")  # noqa: SIM115, ASYNC230
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "magnetar.functions.instance_main", str(spec),
                stdin=asyncio.subprocess.DEVNULL, stdout=log_file, stderr=log_file, cwd=scratch,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(scratch / "tmp")},
            )  # fmt: skip
        finally:
            log_file.close()
        dog = ResourceWatchdog(self._proc.pid, self.config.resources or {}, scratch)
        watch = asyncio.create_task(self._guard(self._proc, dog)) if dog.active else None
        self._watchdog = dog
        try:
            code = await self._proc.wait()
        finally:
            self._watchdog = None
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
        if self._over_limit:
            reason, self._over_limit = self._over_limit, ""
            raise RuntimeError(reason)
        if not self._stop.is_set():
            raise RuntimeError(f"the instance process exited with code {code}")

    async def _guard(self, proc: asyncio.subprocess.Process, dog: ResourceWatchdog) -> None:
        """Run the watchdog; kill the instance when it reports a limit exceeded (as an OOM kill)."""
        reason = await dog.run()
        if reason and proc.returncode is None:
            self._over_limit = reason
            log.warning("function %s instance %d %s", self.config.fqfn, self.instance_id, reason)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    async def _halt(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        if self._watchdog is not None:
            self._watchdog.release()  # a throttled (SIGSTOPped) instance must see its SIGTERM
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    def stats(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.stats_path.read_text())
        except (OSError, ValueError):
            doc = {}
        doc["pid"] = self.pid
        if self.pid is None:
            doc["running"] = False
        return doc


RUNTIMES: dict[str, type[InstanceRuntime]] = {"thread": ThreadRuntime, "process": ProcessRuntime}
