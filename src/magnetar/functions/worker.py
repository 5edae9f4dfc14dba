"""``FunctionsWorker``: keeps function definitions and runs their instances.

Theory of operation: the worker is hosted by a process that a user runs (the
standalone, unless ``--no-functions-worker`` / ``functionsWorkerEnabled=false``).
It keeps every function, source and sink **in the metadata store** (RocksDB in
the standalone; Pulsar uses a system topic, this is the simpler durable place):

    /admin/functions/{tenant}/{ns}/{name}           JSON {"functionConfig", "codeFile",
                                                      "version", "stopped": [instance ids],
                                                      "restarts": {instance id: generation}}
    /admin/functions-packages/{tenant}/{ns}/{name}  the code file's bytes
    /admin/functions-state/{tenant}/{ns}/{name}/... counters and state (see ``state``)

The worker is a reconciler: :meth:`FunctionsWorker.reconcile` reads every
definition and runs exactly the instances that are assigned to it and not
stopped, each at its definition's ``(version, restart generation)``; an
instance whose stamp changed (update, restart) is stopped and started anew,
one no longer wanted is stopped.  Every admin write changes the definition
first and then reconciles, so functions survive a restart of the process and
whichever worker runs an instance obeys start/stop/restart.  The code is written to
``{data_dir}/functions/{tenant}/{ns}/{name}/v{version}/{file}``, which the
instances import.  Each function has ``parallelism`` instances, each in a
runtime (``runtime.RUNTIMES``): the function's ``customRuntimeOptions``
``{"runtime": ...}`` or the worker's default.  In one standalone the worker is
its own scheduler: every instance is assigned to it.  In a cluster
(``magnetar functions-worker``, ``membership`` given) the leader worker writes
the assignment table (``functions.scheduler``) and each worker reconciles on
every change it is notified of and every ``CLUSTER_POLL_S``; the status of an
instance run elsewhere is asked of its worker's REST API.

Errors are :class:`WorkerError` with the HTTP status the REST layer answers
(404 unknown, 409 exists, 400 bad input).  Built-in connectors
(``builtin://file``, ...) come from ``magnetar.connectors`` via ``code_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from magnetar.functions.auth import NO_AUTH, ClientAuth
from magnetar.functions.config import FunctionConfig, FunctionConfigError, parse_function_config
from magnetar.functions.loader import UserCodeError, check_zip
from magnetar.functions.runtime import RUNTIMES, InstanceRuntime
from magnetar.functions.scheduler import ASSIGNMENTS_PATH, WORKERS_ROOT, ClusterMembership, instance_key
from magnetar.functions.state import StateError, StateStore
from magnetar.functions.status import (
    RemoteStatus,
    aggregate_stats,
    not_running,
    worker_info,
)
from magnetar.metadata.api import MetadataStore, NotFound

log = logging.getLogger(__name__)

FUNCTIONS_ROOT = "/admin/functions"
PACKAGES_ROOT = "/admin/functions-packages"
CODE_BYTES_MAX = 16 * 1024 * 1024
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+\.(py|zip)$")
TRIGGER_TIMEOUT_S = 10.0
CLUSTER_POLL_S = 1.0


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
        worker_id: str = "standalone",
        state_url: str | None = None,
        membership: ClusterMembership | None = None,
    ) -> None:
        if default_runtime not in RUNTIMES:
            raise ValueError(f"unknown function runtime {default_runtime!r}; use thread or process")
        self.store = store
        self.data_dir = Path(data_dir)
        self.broker_url = broker_url
        self.web_url = web_url  # the broker's admin API (the output topic's dedup policy)
        self.state_url = state_url or web_url  # this worker's REST API (state)
        self.default_runtime = default_runtime
        client_auth.check()
        self.client_auth = client_auth
        self.worker_id = worker_id
        self.membership = membership
        self.state = StateStore(store)
        self._builtin_code = builtin_code  # callable(archive) -> (file name, bytes) or None
        # (fqfn, instance) -> (runtime, (version, restart generation)) of the instances run here
        self._running: dict[tuple[str, int], tuple[InstanceRuntime, tuple[int, int]]] = {}
        self._lock = asyncio.Lock()
        self._client: Any = None
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._remote = RemoteStatus(client_auth.http_headers())

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.membership is not None:
            self.store.add_listener(self._on_notification)
            await self.membership.start()
            self._loop_task = asyncio.get_running_loop().create_task(
                self._cluster_loop(), name=f"functions-worker:{self.worker_id}"
            )
        await self._changed()

    async def aclose(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        async with self._lock:
            await asyncio.gather(*(r.stop() for r, _ in self._running.values()), return_exceptions=True)
            self._running.clear()
        if self.membership is not None:
            self.store.remove_listener(self._on_notification)
            await self.membership.close()
        if self._client is not None:
            await self._client.close()
        await self._remote.aclose()

    def _on_notification(self, note: Any) -> None:
        if note.path.startswith((FUNCTIONS_ROOT + "/", WORKERS_ROOT, ASSIGNMENTS_PATH)) or note.path in (
            FUNCTIONS_ROOT,
        ):
            self._wake.set()

    async def _cluster_loop(self) -> None:
        """Cluster mode: schedule (when leading) and reconcile on every change, and every second."""
        assert self.membership is not None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLUSTER_POLL_S):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.membership.ensure_registered()
                await self._changed()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("functions worker %s: scheduling round failed", self.worker_id, exc_info=True)

    async def _changed(self) -> None:
        """After a definition changed: the leader reschedules, then this worker reconciles."""
        metas = await self._all_metas()
        if self.membership is not None and self.membership.is_leader:
            keys = [
                instance_key(fqfn, i)
                for fqfn, meta in metas.items()
                for i in range(int(meta["functionConfig"].get("parallelism") or 1))
            ]
            await self.membership.schedule(keys)
        await self.reconcile(metas)

    async def _assignment(self) -> dict[str, str] | None:
        """The assignment table, or None in a standalone (every instance runs here)."""
        return None if self.membership is None else await self.membership.assignments()

    async def reconcile(self, metas: dict[str, dict[str, Any]] | None = None) -> None:
        """Run exactly the instances assigned here and not stopped, each at its current version."""
        async with self._lock:
            if metas is None:
                metas = await self._all_metas()
            table = await self._assignment()
            desired: dict[tuple[str, int], tuple[int, int]] = {}
            for fqfn, meta in metas.items():
                stopped = set(meta.get("stopped", []))
                gens = meta.get("restarts", {})
                for i in range(int(meta["functionConfig"].get("parallelism") or 1)):
                    if i in stopped:
                        continue
                    if table is not None and table.get(instance_key(fqfn, i)) != self.worker_id:
                        continue
                    desired[(fqfn, i)] = (int(meta["version"]), int(gens.get(str(i), 0)))
            gone = [k for k, (_, stamp) in self._running.items() if desired.get(k) != stamp]
            await asyncio.gather(*(self._running.pop(k)[0].stop() for k in gone), return_exceptions=True)
            for key, stamp in sorted(desired.items()):
                if key in self._running:
                    continue
                try:
                    runtime = await self._runtime(metas[key[0]], key[1])
                except Exception:
                    log.exception("cannot start function %s instance %d", *key)
                    continue
                self._running[key] = (runtime, stamp)
                runtime.start()

    async def _children(self, path: str) -> list[str]:
        try:
            return sorted(await self.store.children(path))
        except NotFound:
            return []

    async def _all_metas(self) -> dict[str, dict[str, Any]]:
        out = {}
        for tenant in await self._children(FUNCTIONS_ROOT):
            for ns in await self._children(f"{FUNCTIONS_ROOT}/{tenant}"):
                for name in await self._children(f"{FUNCTIONS_ROOT}/{tenant}/{ns}"):
                    try:
                        out[f"{tenant}/{ns}/{name}"] = await self._meta(tenant, ns, name)
                    except WorkerError:
                        continue  # deleted meanwhile
        return out

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
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(got.value)
            tmp.replace(path)
        return path

    async def _runtime(self, meta: dict[str, Any], instance: int) -> InstanceRuntime:
        cfg = parse_function_config(meta["functionConfig"])
        code = await self._materialize(cfg, meta)
        kind = cfg.runtime_kind.value if cfg.runtime_kind else self.default_runtime
        work = self.data_dir / "functions" / cfg.fqfn / "work"
        return RUNTIMES[kind](
            cfg, instance, str(code), self.broker_url, self.web_url, work,
            auth=self.client_auth, worker_id=self.worker_id, state_url=self.state_url,
        )  # fmt: skip

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
            raise WorkerError(400, f"code file {filename!r}: a Python file (*.py) or a zip of one (*.zip)")
        if filename.endswith(".zip"):
            try:
                check_zip(code)
            except UserCodeError as exc:
                raise WorkerError(400, f"code file {filename!r}: {exc}")
        return filename, code

    def _check_runtime(self, cfg: FunctionConfig) -> None:
        kind = cfg.runtime_kind.value if cfg.runtime_kind else self.default_runtime
        what = {"ram": "memory", "cpu": "CPU", "disk": "working directory"}
        for key in ("ram", "cpu", "disk"):
            if kind == "thread" and (cfg.resources or {}).get(key):
                raise WorkerError(
                    400,
                    f"resources.{key} cannot be enforced in the thread runtime (instances share the "
                    f"worker's {what[key]}); use the process runtime "
                    '(customRuntimeOptions {"runtime": "process"})',
                )

    async def register(
        self, doc: Any, code: bytes | None, filename: str | None, component: str | None = None
    ) -> None:
        try:
            cfg = parse_function_config(doc, component=component)
        except FunctionConfigError as exc:
            raise WorkerError(400, str(exc))
        self._check_runtime(cfg)
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
        await self._changed()

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
            self._check_runtime(cfg)
            meta["functionConfig"] = cfg.to_json()
            meta["version"] = int(meta["version"]) + 1
            if code is not None:
                meta["codeFile"], data = self._code(cfg, code, filename)
                await self.store.put(f"{PACKAGES_ROOT}/{cfg.fqfn}", data)
            await self.store.put(f"{FUNCTIONS_ROOT}/{cfg.fqfn}", json.dumps(meta).encode())
        await self._changed()

    async def deregister(self, tenant: str, ns: str, name: str) -> None:
        async with self._lock:
            meta = await self._meta(tenant, ns, name)
            cfg = parse_function_config(meta["functionConfig"])
            await self.store.delete(f"{FUNCTIONS_ROOT}/{cfg.fqfn}")
            try:
                await self.store.delete(f"{PACKAGES_ROOT}/{cfg.fqfn}")
            except NotFound:
                pass
            await self.state.drop_all(cfg.fqfn)
        await self._changed()  # its instances stop here (and, on their next round, on other workers)
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

    # --- instances ---------------------------------------------------------------------------------

    async def _instance_status(self, fqfn: str, meta: dict[str, Any], i: int, forwarded: bool) -> dict:
        local = self._running.get((fqfn, i))
        if local is not None:
            return local[0].status()
        if i in set(meta.get("stopped", [])):
            return not_running(i, "stopped")
        table = await self._assignment()
        owner = None if table is None else table.get(instance_key(fqfn, i))
        if owner is None:
            return not_running(i, "not scheduled yet")
        if owner == self.worker_id or forwarded:
            return not_running(i, "starting", owner)
        assert self.membership is not None
        url = (await self.membership.workers()).get(owner, {}).get("webServiceUrl")
        return {"instanceId": i, "status": await self._remote.get(url, fqfn, i, owner)}

    async def status(
        self, tenant: str, ns: str, name: str, instance: int | None = None, *, forwarded: bool = False
    ) -> dict[str, Any]:
        meta = await self._meta(tenant, ns, name)
        fqfn = f"{tenant}/{ns}/{name}"
        parallelism = int(meta["functionConfig"].get("parallelism") or 1)
        if instance is not None:
            if not 0 <= instance < parallelism:
                raise WorkerError(400, f"instance {instance} does not exist (parallelism {parallelism})")
            return (await self._instance_status(fqfn, meta, instance, forwarded))["status"]
        instances = [await self._instance_status(fqfn, meta, i, forwarded) for i in range(parallelism)]
        return {
            "numInstances": len(instances),
            "numRunning": sum(1 for i in instances if i["status"]["running"]),
            "instances": instances,
        }

    async def stats(self, tenant: str, ns: str, name: str) -> dict[str, Any]:
        return aggregate_stats(await self.status(tenant, ns, name))

    async def set_running(self, tenant: str, ns: str, name: str, instance: int | None, action: str) -> None:
        """start / stop / restart: recorded in the definition, so whichever worker runs it obeys."""
        async with self._lock:
            meta = await self._meta(tenant, ns, name)
            fqfn = f"{tenant}/{ns}/{name}"
            parallelism = int(meta["functionConfig"].get("parallelism") or 1)
            if instance is not None and not 0 <= instance < parallelism:
                raise WorkerError(400, f"instance {instance} does not exist (parallelism {parallelism})")
            ids = set(range(parallelism)) if instance is None else {instance}
            stopped = set(meta.get("stopped", []))
            if action == "stop":
                stopped |= ids
            else:
                stopped -= ids
            if action == "restart":
                gens = meta.setdefault("restarts", {})
                for i in ids:
                    gens[str(i)] = int(gens.get(str(i), 0)) + 1
            meta["stopped"] = sorted(stopped)
            await self.store.put(f"{FUNCTIONS_ROOT}/{fqfn}", json.dumps(meta).encode())
        await self._changed()

    async def cluster(self) -> list[dict[str, Any]]:
        """Pulsar's ``worker cluster``: every live worker's WorkerInfo."""
        if self.membership is None:
            return [worker_info(self.worker_id, self.state_url)]
        workers = await self.membership.workers()
        return [worker_info(w, i["webServiceUrl"]) for w, i in sorted(workers.items())]

    async def leader(self) -> dict[str, Any]:
        if self.membership is None:
            return worker_info(self.worker_id, self.state_url)
        value = await self.membership.election.leader_value()
        if value is None:
            raise WorkerError(503, "no leader worker elected yet")
        wid = value.decode()
        return worker_info(wid, (await self.membership.workers()).get(wid, {}).get("webServiceUrl", ""))

    def instance_pids(self, fqfn: str) -> list[int | None]:
        return [getattr(r, "pid", None) for (f, _), (r, _) in sorted(self._running.items()) if f == fqfn]

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
