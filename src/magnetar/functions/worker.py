"""``FunctionsWorker``: keeps function definitions and runs their instances.

Theory of operation: the worker is hosted by a process that a user runs (the
standalone, unless ``--no-functions-worker`` / ``functionsWorkerEnabled=false``).
It keeps every function, source and sink **in the metadata store** (RocksDB in
the standalone; Pulsar uses a system topic, this is the simpler durable place):

    /admin/functions/{tenant}/{ns}/{name}           JSON {"functionConfig", "codeFile",
                                                      "version", "stopped": [instance ids]}
    /admin/functions-packages/{tenant}/{ns}/{name}  the code file's bytes
    /admin/functions-state/{tenant}/{ns}/{name}/... counters and state (see ``state``)

On start it reads them all back and starts their instances, so functions
survive a restart of the process.  The code is written to
``{data_dir}/functions/{tenant}/{ns}/{name}/v{version}/{file}``, which the
instances import.  Each function has ``parallelism`` instances, each in a
runtime (``runtime.RUNTIMES``): the function's ``customRuntimeOptions``
``{"runtime": ...}`` or the worker's default.  In one standalone the worker is
its own scheduler: every instance is assigned to it.

Errors are :class:`WorkerError` with the HTTP status the REST layer answers
(404 unknown, 409 exists, 400 bad input).  Built-in connectors
(``builtin://file``, ...) come from ``magnetar.connectors`` via ``code_for``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from magnetar.functions.auth import NO_AUTH, ClientAuth
from magnetar.functions.config import FunctionConfig, FunctionConfigError, parse_function_config
from magnetar.functions.runtime import RUNTIMES, InstanceRuntime
from magnetar.functions.state import StateError, StateStore
from magnetar.metadata.api import MetadataStore, NotFound

log = logging.getLogger(__name__)

FUNCTIONS_ROOT = "/admin/functions"
PACKAGES_ROOT = "/admin/functions-packages"
CODE_BYTES_MAX = 16 * 1024 * 1024
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+\.py$")
TRIGGER_TIMEOUT_S = 10.0


class WorkerError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class FunctionsWorker:
    def __init__(
        self,
        store: MetadataStore,
        data_dir: Path,
        broker_url: str,
        web_url: str,
        *,
        default_runtime: str = "process",
        builtin_code: Any = None,
        client_auth: ClientAuth = NO_AUTH,
    ) -> None:
        if default_runtime not in RUNTIMES:
            raise ValueError(f"unknown function runtime {default_runtime!r}; use thread or process")
        self.store = store
        self.data_dir = Path(data_dir)
        self.broker_url = broker_url
        self.web_url = web_url
        self.default_runtime = default_runtime
        client_auth.check()
        self.client_auth = client_auth
        self.state = StateStore(store)
        self._builtin_code = builtin_code  # callable(archive) -> (file name, bytes) or None
        self._instances: dict[str, list[InstanceRuntime]] = {}
        self._lock = asyncio.Lock()
        self._client: Any = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        for tenant in await self._children(FUNCTIONS_ROOT):
            for ns in await self._children(f"{FUNCTIONS_ROOT}/{tenant}"):
                for name in await self._children(f"{FUNCTIONS_ROOT}/{tenant}/{ns}"):
                    try:
                        await self._launch(await self._meta(tenant, ns, name))
                    except Exception:
                        log.exception("cannot start function %s/%s/%s", tenant, ns, name)

    async def aclose(self) -> None:
        async with self._lock:
            for runtimes in self._instances.values():
                await asyncio.gather(*(r.stop() for r in runtimes), return_exceptions=True)
            self._instances.clear()
        if self._client is not None:
            await self._client.close()

    async def _children(self, path: str) -> list[str]:
        try:
            return sorted(await self.store.children(path))
        except NotFound:
            return []

    # --- metadata --------------------------------------------------------------------------------

    async def _meta(self, tenant: str, ns: str, name: str) -> dict[str, Any]:
        got = await self.store.get(f"{FUNCTIONS_ROOT}/{tenant}/{ns}/{name}")
        if got is None:
            raise WorkerError(404, f"Function {name} doesn't exist")
        return json.loads(got.value)

    def _code_path(self, cfg: FunctionConfig, meta: dict[str, Any]) -> Path:
        return self.data_dir / "functions" / cfg.fqfn / f"v{meta['version']}" / meta["codeFile"]

    async def _materialize(self, cfg: FunctionConfig, meta: dict[str, Any]) -> Path:
        path = self._code_path(cfg, meta)
        if not path.exists():
            got = await self.store.get(f"{PACKAGES_ROOT}/{cfg.fqfn}")
            if got is None:
                raise WorkerError(500, f"the code of {cfg.fqfn} is missing from the package store")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(got.value)
        return path

    async def _launch(self, meta: dict[str, Any]) -> None:
        cfg = parse_function_config(meta["functionConfig"])
        code = await self._materialize(cfg, meta)
        kind = cfg.runtime_kind.value if cfg.runtime_kind else self.default_runtime
        work = self.data_dir / "functions" / cfg.fqfn / "work"
        runtimes = [
            RUNTIMES[kind](cfg, i, str(code), self.broker_url, self.web_url, work, auth=self.client_auth)
            for i in range(cfg.parallelism)
        ]
        self._instances[cfg.fqfn] = runtimes
        stopped = set(meta.get("stopped", []))
        for r in runtimes:
            if r.instance_id not in stopped:
                r.start()

    async def _halt(self, fqfn: str) -> None:
        runtimes = self._instances.pop(fqfn, [])
        await asyncio.gather(*(r.stop() for r in runtimes), return_exceptions=True)

    def _code(self, cfg: FunctionConfig, code: bytes | None, filename: str | None) -> tuple[str, bytes]:
        if code is None and cfg.archive and self._builtin_code is not None:
            builtin = self._builtin_code(cfg.archive, cfg.componentType or "sink")
            if builtin is None:
                raise WorkerError(400, f"no built-in connector {cfg.archive!r}")
            return builtin
        if code is None:
            raise WorkerError(400, "the function's code file (data) is required")
        if len(code) > CODE_BYTES_MAX:
            raise WorkerError(400, f"the code file is larger than {CODE_BYTES_MAX} bytes")
        filename = Path(filename or cfg.py or "function.py").name
        if not FILE_NAME_RE.match(filename):
            raise WorkerError(400, f"code file {filename!r}: only a Python file (*.py) is supported")
        return filename, code

    async def register(
        self, doc: Any, code: bytes | None, filename: str | None, component: str | None = None
    ) -> None:
        try:
            cfg = parse_function_config(doc, component=component)
        except FunctionConfigError as exc:
            raise WorkerError(400, str(exc))
        async with self._lock:
            path = f"{FUNCTIONS_ROOT}/{cfg.fqfn}"
            if await self.store.get(path) is not None:
                raise WorkerError(409, f"Function {cfg.name} already exists")
            fname, data = self._code(cfg, code, filename)
            if not cfg.className:  # a built-in connector: its shim module's class
                cfg = dataclasses.replace(cfg, className=f"{Path(fname).stem}.Connector")
            await self.store.put(f"{PACKAGES_ROOT}/{cfg.fqfn}", data)
            meta = {"functionConfig": cfg.to_json(), "codeFile": fname, "version": 1, "stopped": []}
            await self.store.put(path, json.dumps(meta).encode())
            await self._launch(meta)

    async def update(
        self, tenant: str, ns: str, name: str, doc: Any, code: bytes | None, filename: str | None
    ) -> None:
        async with self._lock:
            meta = await self._meta(tenant, ns, name)
            old = parse_function_config(meta["functionConfig"])
            if not isinstance(doc, dict):
                raise WorkerError(400, "the function config must be a JSON object")
            try:
                cfg = old.merged({**doc, "tenant": tenant, "namespace": ns, "name": name})
            except FunctionConfigError as exc:
                raise WorkerError(400, str(exc))
            meta["functionConfig"] = cfg.to_json()
            meta["version"] = int(meta["version"]) + 1
            if code is not None:
                meta["codeFile"], data = self._code(cfg, code, filename)
                await self.store.put(f"{PACKAGES_ROOT}/{cfg.fqfn}", data)
            await self._halt(cfg.fqfn)
            await self.store.put(f"{FUNCTIONS_ROOT}/{cfg.fqfn}", json.dumps(meta).encode())
            await self._launch(meta)

    async def deregister(self, tenant: str, ns: str, name: str) -> None:
        async with self._lock:
            meta = await self._meta(tenant, ns, name)
            cfg = parse_function_config(meta["functionConfig"])
            await self._halt(cfg.fqfn)
            await self.store.delete(f"{FUNCTIONS_ROOT}/{cfg.fqfn}")
            try:
                await self.store.delete(f"{PACKAGES_ROOT}/{cfg.fqfn}")
            except NotFound:
                pass
            await self.state.drop_all(cfg.fqfn)
            shutil.rmtree(self.data_dir / "functions" / cfg.fqfn, ignore_errors=True)

    async def get(self, tenant: str, ns: str, name: str) -> dict[str, Any]:
        return (await self._meta(tenant, ns, name))["functionConfig"]

    async def code(self, tenant: str, ns: str, name: str) -> tuple[str, bytes]:
        meta = await self._meta(tenant, ns, name)
        got = await self.store.get(f"{PACKAGES_ROOT}/{tenant}/{ns}/{name}")
        if got is None:
            raise WorkerError(404, f"no code stored for {name}")
        return meta["codeFile"], got.value

    async def list(self, tenant: str, ns: str, component: str | None = None) -> list[str]:
        out = []
        for name in await self._children(f"{FUNCTIONS_ROOT}/{tenant}/{ns}"):
            try:
                meta = await self._meta(tenant, ns, name)
            except WorkerError:
                continue
            if meta["functionConfig"].get("componentType") == component:
                out.append(name)
        return out

    # --- instances -------------------------------------------------------------------------------

    def _runtimes(self, fqfn: str, instance: int | None) -> list[InstanceRuntime]:
        runtimes = self._instances.get(fqfn, [])
        if instance is None:
            return runtimes
        if not 0 <= instance < len(runtimes):
            raise WorkerError(400, f"instance {instance} does not exist (parallelism {len(runtimes)})")
        return [runtimes[instance]]

    async def status(self, tenant: str, ns: str, name: str, instance: int | None = None) -> dict[str, Any]:
        await self._meta(tenant, ns, name)
        instances = [r.status() for r in self._runtimes(f"{tenant}/{ns}/{name}", instance)]
        if instance is not None:
            return instances[0]["status"]
        return {
            "numInstances": len(instances),
            "numRunning": sum(1 for i in instances if i["status"]["running"]),
            "instances": instances,
        }

    async def stats(self, tenant: str, ns: str, name: str) -> dict[str, Any]:
        st = await self.status(tenant, ns, name)
        inst = [i["status"] for i in st["instances"]]
        done = sum(i["numSuccessfullyProcessed"] for i in inst)
        return {
            "receivedTotal": sum(i["numReceived"] for i in inst),
            "processedSuccessfullyTotal": done,
            "systemExceptionsTotal": sum(i["numSystemExceptions"] for i in inst),
            "userExceptionsTotal": sum(i["numUserExceptions"] for i in inst),
            "avgProcessLatency": (
                sum(i["averageLatency"] * i["numSuccessfullyProcessed"] for i in inst) / done
                if done
                else None
            ),
            "lastInvocation": max((i["lastInvocationTime"] for i in inst), default=0),
            "instances": [{"instanceId": i["instanceId"], "metrics": i["status"]} for i in st["instances"]],
        }

    async def set_running(self, tenant: str, ns: str, name: str, instance: int | None, action: str) -> None:
        async with self._lock:
            meta = await self._meta(tenant, ns, name)
            fqfn = f"{tenant}/{ns}/{name}"
            runtimes = self._runtimes(fqfn, instance)
            stopped = set(meta.get("stopped", []))
            ids = {r.instance_id for r in runtimes}
            stopped = stopped | ids if action == "stop" else stopped - ids
            meta["stopped"] = sorted(stopped)
            await self.store.put(f"{FUNCTIONS_ROOT}/{fqfn}", json.dumps(meta).encode())
            for r in runtimes:
                if action == "stop":
                    await r.stop()
                elif action == "start":
                    r.start()
                else:
                    await r.restart()

    def instance_pids(self, fqfn: str) -> list[int | None]:
        return [getattr(r, "pid", None) for r in self._instances.get(fqfn, [])]

    # --- trigger and state -----------------------------------------------------------------------

    async def trigger(self, tenant: str, ns: str, name: str, value: bytes, topic: str | None) -> Any:
        cfg = parse_function_config(await self.get(tenant, ns, name))
        target = topic or (cfg.inputs[0] if cfg.inputs else None)
        if target is None:
            raise WorkerError(400, "the function has no input topic to trigger; give topic")
        if cfg.inputs and target not in cfg.inputs:
            raise WorkerError(400, f"{target} is not an input topic of {name}")
        from magnetar.client import LATEST, Client

        if self._client is None:
            self._client = Client(self.broker_url, authentication=self.client_auth.client_authentication())
        reader = await self._client.create_reader(cfg.output, LATEST) if cfg.output else None
        try:
            producer = await self._client.create_producer(target)
            try:
                await producer.send(value)
            finally:
                await producer.close()
            if reader is None:
                return None
            msg = await reader.read_next(int(TRIGGER_TIMEOUT_S * 1000))
            return msg.data().decode("utf-8", "replace")
        finally:
            if reader is not None:
                await reader.close()

    async def state_get(self, tenant: str, ns: str, name: str, key: str) -> dict[str, Any]:
        try:
            doc = await self.state.get(f"{tenant}/{ns}/{name}", key)
        except StateError as exc:
            raise WorkerError(400, str(exc))
        if doc is None:
            raise WorkerError(404, f"key '{key}' doesn't exist")
        return doc

    async def state_put(self, tenant: str, ns: str, name: str, key: str, doc: dict[str, Any]) -> None:
        try:
            await self.state.put(f"{tenant}/{ns}/{name}", key, doc)
        except StateError as exc:
            raise WorkerError(400, str(exc))

    async def state_incr(self, tenant: str, ns: str, name: str, key: str, amount: int) -> int:
        try:
            return await self.state.incr(f"{tenant}/{ns}/{name}", key, amount)
        except StateError as exc:
            raise WorkerError(400, str(exc))

    async def state_delete(self, tenant: str, ns: str, name: str, key: str) -> None:
        await self.state.delete(f"{tenant}/{ns}/{name}", key)
