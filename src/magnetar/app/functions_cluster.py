"""``magnetar functions-worker``: a function worker of a cluster, as its own process.

Theory of operation: Pulsar runs its workers beside the brokers, each reading
``conf/functions_worker.yml``.  :func:`load_worker_config` reads the same file
(YAML) and the keys Magnetar uses:

=====================================  ===============================================
``workerId``                           this worker's name in the membership (unique)
``workerHostname`` / ``workerPort``    where its REST API (``/admin/v3/functions...``)
                                       listens (``workerPort: 0`` = any free port)
``pulsarServiceUrl``                   the broker its instances consume from/produce to
``pulsarWebServiceUrl``                the broker's admin API (the output topic's
                                       deduplication policy for EFFECTIVELY_ONCE)
``configurationMetadataStoreUrl``      the shared metadata store (``zk:host:port``);
(or ``metadataStoreUrl``)              definitions, code, state, membership, leader
                                       and assignments live there
``metadataStoreSessionTimeoutMillis``  how soon a dead worker leaves the membership
``downloadDirectory``                  where the code is written for the instances
``functionRuntimeFactoryClassName``    ``...ProcessRuntimeFactory`` (default) or
                                       ``...ThreadRuntimeFactory``
``clientAuthenticationPlugin`` /       the instances' credentials (functions.auth)
``clientAuthenticationParameters``
``numFunctionPackageReplicas``         accepted; the code lives in the metadata store
``authenticationEnabled``,             the broker's keys (``authenticationProviders``,
``authorizationEnabled``, ...          ``tokenSecretKey``, ``superUserRoles``...): the
                                       worker's REST API authenticates and authorizes
                                       as the broker's (functions: tenant admins)
=====================================  ===============================================

Function metadata: Pulsar keeps definitions in a compacted system topic
(``public/functions/metadata``) read by every worker; Magnetar keeps them in the
shared metadata store (``/admin/functions``, see ``functions.worker``), which the
workers already need for the leader election and membership: one durable,
CAS-updated, watched place, no topic to bootstrap before the first worker
starts, and the standalone uses the very same layout.

:class:`FunctionsWorkerProcess` opens the store, starts a
:class:`~magnetar.functions.worker.FunctionsWorker` with a
:class:`~magnetar.functions.scheduler.ClusterMembership`, serves the functions
REST API with uvicorn on the worker port and prints ``magnetar functions-worker
ready: <id> <url>``; SIGTERM stops the instances, leaves the membership and
exits (a leader's departure hands scheduling to another worker at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

RUNTIME_FACTORIES = {
    "org.apache.pulsar.functions.runtime.process.ProcessRuntimeFactory": "process",
    "org.apache.pulsar.functions.runtime.thread.ThreadRuntimeFactory": "thread",
    "process": "process",
    "thread": "thread",
}


class WorkerConfigError(ValueError):
    """The functions_worker.yml cannot be used (the message says which key and why)."""


@dataclass(frozen=True)
class WorkerConfig:
    worker_id: str
    hostname: str
    port: int
    broker_url: str
    broker_web_url: str
    metadata_url: str
    session_timeout_ms: int
    data_dir: Path
    runtime: str
    auth_plugin: str
    auth_params: str
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)  # every key, as text


def load_worker_config(doc: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> WorkerConfig:
    merged = {**doc, **{k: v for k, v in (overrides or {}).items() if v is not None}}

    def need(key: str, *alts: str) -> str:
        for k in (key, *alts):
            if merged.get(k) not in (None, ""):
                return str(merged[k])
        raise WorkerConfigError(f"functions worker config: {key} is required")

    worker_id = need("workerId")
    try:
        port = int(merged.get("workerPort", 6750))
        timeout_ms = int(merged.get("metadataStoreSessionTimeoutMillis", 30_000))
    except (TypeError, ValueError) as exc:
        raise WorkerConfigError(f"functions worker config: {exc}") from None
    factory = str(
        merged.get("functionRuntimeFactoryClassName")
        or "org.apache.pulsar.functions.runtime.process.ProcessRuntimeFactory"
    )
    if factory not in RUNTIME_FACTORIES:
        raise WorkerConfigError(
            f"functionRuntimeFactoryClassName {factory!r}: use the Process or Thread RuntimeFactory"
        )
    return WorkerConfig(
        worker_id=worker_id,
        hostname=str(merged.get("workerHostname") or "127.0.0.1"),
        port=port,
        broker_url=need("pulsarServiceUrl"),
        broker_web_url=need("pulsarWebServiceUrl"),
        metadata_url=need("configurationMetadataStoreUrl", "metadataStoreUrl"),
        session_timeout_ms=timeout_ms,
        data_dir=Path(str(merged.get("downloadDirectory") or f"functions-worker-data/{worker_id}")),
        runtime=RUNTIME_FACTORIES[factory],
        auth_plugin=str(merged.get("clientAuthenticationPlugin") or ""),
        auth_params=str(merged.get("clientAuthenticationParameters") or ""),
        properties={k: _text(v) for k, v in merged.items() if v is not None},
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def read_worker_yaml(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise WorkerConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise WorkerConfigError(f"{path}: expected a mapping of keys")
    return doc


class _InLoopServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class FunctionsWorkerProcess:
    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.store: Any = None
        self.worker: Any = None
        self._http: _InLoopServer | None = None
        self._http_task: asyncio.Task[None] | None = None
        self.web_url = ""
        self._stop = asyncio.Event()
        self._authn: Any = None

    async def start(self) -> None:
        from magnetar.connectors import builtin_code
        from magnetar.functions.auth import ClientAuth
        from magnetar.functions.scheduler import ClusterMembership
        from magnetar.functions.worker import FunctionsWorker
        from magnetar.metadata.factory import create_metadata_store
        from magnetar.runtime import RealClock
        from magnetar.web.functions import create_worker_app

        c = self.config
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((c.hostname, c.port))
        sock.listen(128)
        self.web_url = f"http://{c.hostname}:{sock.getsockname()[1]}"
        self.store = await create_metadata_store(
            c.metadata_url, clock=RealClock(), session_timeout_ms=c.session_timeout_ms
        )
        c.data_dir.mkdir(parents=True, exist_ok=True)
        self.worker = FunctionsWorker(
            self.store, c.data_dir, c.broker_url, c.broker_web_url,
            default_runtime=c.runtime, builtin_code=builtin_code,
            client_auth=ClientAuth(c.auth_plugin, c.auth_params), worker_id=c.worker_id,
            state_url=self.web_url, membership=ClusterMembership(self.store, c.worker_id, self.web_url),
        )  # fmt: skip
        app = create_worker_app(self.worker, self._auth_services())
        self._http = _InLoopServer(
            uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", loop="none")
        )
        self._http_task = asyncio.get_running_loop().create_task(self._http.serve(sockets=[sock]))
        async with asyncio.timeout(30):
            while not self._http.started:
                if self._http_task.done():
                    self._http_task.result()
                    raise RuntimeError("the worker's HTTP server stopped during start-up")
                await asyncio.sleep(0.01)
        await self.worker.start()

    def _auth_services(self) -> Any:
        """The broker's authentication/authorization services over this worker's store, or None."""
        from types import SimpleNamespace

        from magnetar.broker.auth.authorization import AuthorizationService
        from magnetar.broker.auth.config import AuthConfig
        from magnetar.broker.auth.service import AuthenticationService
        from magnetar.runtime import RealClock

        cfg = AuthConfig.from_properties(self.config.properties)
        if not (cfg.authentication_enabled or cfg.authorization_enabled):
            return None
        self._authn = AuthenticationService.from_config(cfg, RealClock())
        return SimpleNamespace(
            authentication=self._authn, authorization=AuthorizationService(cfg, self.store)
        )

    @property
    def ready_line(self) -> str:
        return f"magnetar functions-worker ready: {self.config.worker_id} {self.web_url}"

    def request_stop(self) -> None:
        self._stop.set()

    async def run_until_stopped(self) -> None:
        await self._stop.wait()

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.aclose()
        if self._http is not None:
            self._http.should_exit = True
            if self._http_task is not None:
                await asyncio.gather(self._http_task, return_exceptions=True)
        if self._authn is not None:
            await self._authn.aclose()
        if self.store is not None:
            await self.store.aclose()
