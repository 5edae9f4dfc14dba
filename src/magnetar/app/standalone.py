"""``Standalone``: broker + bookie + metadata store + HTTP in one process and one event loop.

Theory of operation: this is a composition root.  It owns nothing but the
order in which things start and stop:

    start:  storage stack (metadata -> bookie -> ledger client -> managed ledgers)
            -> bind the HTTP socket (so port 0 is resolved before lookups need it)
            -> BrokerService binds the binary port, learns the web port, and
               initialises cluster/tenant/namespaces on first start
            -> uvicorn serves the web front (``web.front``: /metrics, lookup,
               WebSocket at once; the FastAPI admin app built on the first
               request that needs it) on the bound socket, as a task of this
               loop (``Server.serve``; never ``uvicorn.run``)
            -> RUNNING: ``ready_line`` is what the CLI prints
    stop:   HTTP server -> BrokerService (connections, producers, consumers,
            topics, managed ledgers) -> storage stack, top-down.

State machine (one place, :meth:`_move`)::

    NEW --start--> STARTING --ok--> RUNNING --aclose--> STOPPING --> STOPPED
                       \\--failure--> STOPPING --> STOPPED (start() re-raises)

``aclose`` is idempotent and safe from any state; ``wait_closed`` lets a
caller (the CLI) park until a signal handler has called ``request_stop``.
Uvicorn's own signal capture is disabled: the process owner (the CLI) installs
SIGTERM/SIGINT handlers on the loop and calls ``request_stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from magnetar.app.config import StandaloneConfig
from magnetar.app.config_keys import log_unknown_keys
from magnetar.app.functions_worker import start_functions_worker
from magnetar.app.healthcheck import make_health_check
from magnetar.app.plugins import PluginError, Plugins
from magnetar.app.storage import StorageStack, broker_metadata_view, open_standalone_storage
from magnetar.app.tls import broker_client_credentials, start_tls_listeners
from magnetar.runtime import Clock, RealClock, Rng
from magnetar.web.front import WebFront
from magnetar.web.metrics_process import register_bookie_metrics

log = logging.getLogger(__name__)

# Bounds on shutdown steps: a stuck component must not keep the process alive forever.
HTTP_STOP_TIMEOUT_S = 5.0
BROKER_STOP_TIMEOUT_S = 30.0
STORAGE_STOP_TIMEOUT_S = 30.0
HTTP_START_TIMEOUT_S = 10.0


class StandaloneState(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


_TRANSITIONS: dict[StandaloneState, frozenset[StandaloneState]] = {
    StandaloneState.NEW: frozenset({StandaloneState.STARTING, StandaloneState.STOPPED}),
    StandaloneState.STARTING: frozenset({StandaloneState.RUNNING, StandaloneState.STOPPING}),
    StandaloneState.RUNNING: frozenset({StandaloneState.STOPPING}),
    StandaloneState.STOPPING: frozenset({StandaloneState.STOPPED}),
    StandaloneState.STOPPED: frozenset(),
}


class StandaloneError(Exception):
    """Start was refused (wrong state) or a component failed to come up."""


class _InLoopServer(uvicorn.Server):
    """uvicorn's Server without its signal capture (the process owner handles signals)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Standalone:
    def __init__(
        self,
        config: StandaloneConfig,
        *,
        clock: Clock | None = None,
        rng: Rng | None = None,
        storage: StorageStack | None = None,
        owns_storage: bool | None = None,
        namespace_service: Any = None,
    ) -> None:
        """``namespace_service``: the bundle-ownership factory handed to the BrokerService
        (``magnetar broker`` passes the cluster one); None = this process owns every bundle."""
        self.config = config
        self._namespace_service = namespace_service
        self.clock = clock or RealClock()
        self.rng = rng or Rng()
        self.state = StandaloneState.NEW
        self._storage = storage
        # A stack we open we close; a stack handed in is closed only if we are told we own it.
        self._owns_storage = storage is None if owns_storage is None else owns_storage
        self.broker_service: Any = None
        self._preload_task: asyncio.Task[None] | None = None
        self._http: _InLoopServer | None = None
        self._http_task: asyncio.Task[None] | None = None
        self._http_socket: socket.socket | None = None
        self._stop_requested = asyncio.Event()
        self._closed = asyncio.Event()
        self.broker_port: int = 0
        self.web_port: int = 0
        self.tls: Any = None  # app.tls.TlsListeners when a TLS port is configured
        self.plugins: Plugins | None = None  # app.plugins: brokerInterceptors, servlets, protocols...
        self.functions_worker: Any = None  # app.functions_worker.FunctionsWorkerHandle unless disabled

    @staticmethod
    def _plugin_step(step: Any, *args: Any) -> None:
        try:
            step(*args)
        except PluginError as exc:
            raise StandaloneError(str(exc)) from exc

    # --- state machine -------------------------------------------------------------------------

    def _move(self, to: StandaloneState) -> None:
        if to not in _TRANSITIONS[self.state]:
            raise StandaloneError(f"standalone cannot go from {self.state.value} to {to.value}")
        log.debug("standalone %s -> %s", self.state.value, to.value)
        self.state = to

    # --- addresses ----------------------------------------------------------------------------

    @property
    def advertised_address(self) -> str:
        return self.config.advertised_address

    @property
    def broker_url(self) -> str:
        return f"pulsar://{self.advertised_address}:{self.broker_port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.advertised_address}:{self.web_port}"

    @property
    def ready_line(self) -> str:
        return f"magnetar ready: {self.broker_url} {self.web_url}"

    # --- start ----------------------------------------------------------------------------------

    async def start(self) -> None:
        self._move(StandaloneState.STARTING)
        try:
            await self._start_components()
        except BaseException:
            await self._shutdown()
            raise
        self._move(StandaloneState.RUNNING)

    async def _start_components(self) -> None:
        from magnetar.broker.config import config_from_properties
        from magnetar.broker.service import BrokerService

        # Every component types its keys below; the keys none of them reads are named once, here.
        log_unknown_keys(self.config.properties, log)
        if self._storage is None:
            self._storage = await open_standalone_storage(self.config, clock=self.clock, rng=self.rng)
        try:
            self.plugins = Plugins(self._broker_properties())  # broker.plugins: fails with the reason
        except PluginError as exc:
            raise StandaloneError(str(exc)) from exc
        broker_config = config_from_properties(self.plugins.broker_properties)
        self._http_socket = _bind_tcp(self.config.bind_address, self.config.web_port)
        self.web_port = self._http_socket.getsockname()[1]

        metadata = await broker_metadata_view(self._storage, self.config.properties, clock=self.clock)
        svc = BrokerService(
            broker_config,
            metadata,
            self._storage.ml_factory,
            self.clock,
            self.rng,
            extensions=self.plugins.ext,
            namespace_service=self._namespace_service,
        )
        self.broker_service = svc
        svc.replication.credentials = broker_client_credentials(self.config.properties)  # replicators
        self._plugin_step(self.plugins.initialize_on, svc)
        await svc.serve(self.config.bind_address, self.config.broker_port)
        self.broker_port = svc.broker_port
        svc.set_web_service_port(self.web_port)
        await svc.start()
        await self._start_http(svc)
        assert self._http is not None
        try:
            await self.plugins.start_protocol_handlers(svc)
        except PluginError as exc:
            raise StandaloneError(str(exc)) from exc
        self.tls = await start_tls_listeners(svc, self._http.config.app, self.config.bind_address)
        if self.tls is not None and getattr(self.tls, "web_port_tls", None):
            svc.set_web_service_port_tls(self.tls.web_port_tls)
        refresh = getattr(svc.namespace_service, "refresh_registration", None)
        if refresh is not None:  # a cluster broker: publish the TLS URLs known only now
            await refresh()
        self.functions_worker = await start_functions_worker(self, self._http.config.app)
        self._preload_admin_routes(self._http.config.app)

    def _preload_admin_routes(self, front: WebFront) -> None:
        """``magnetarAdminRoutesPreloadDelayMs`` >= 0: build the FastAPI admin app that long after
        ready (web.front), so the first admin request does not pay for it.  Off by default: an
        idle broker holds no FastAPI (start-up time and idle memory, issue 15)."""
        raw = str(self.config.properties.get("magnetarAdminRoutesPreloadDelayMs") or "-1").strip()
        try:
            delay_s = int(raw) / 1000
        except ValueError:
            raise StandaloneError(
                f"magnetarAdminRoutesPreloadDelayMs={raw!r}: expected milliseconds"
            ) from None
        if front.app is not None or delay_s < 0:
            return
        self._preload_task = asyncio.get_running_loop().create_task(
            front.build_in_background(delay_s), name="standalone:admin-routes"
        )

    def _broker_properties(self) -> dict[str, str]:
        props = dict(self.config.properties)
        props["advertisedAddress"] = self.config.advertised_address
        props["clusterName"] = self.config.cluster_name
        return props

    async def _start_http(self, svc: Any) -> None:
        # The health check is a client of our own binary port: connect where we listen.
        host = "127.0.0.1" if self.config.bind_address in ("0.0.0.0", "") else self.config.bind_address
        host = "::1" if host == "::" else host
        topic = f"persistent://pulsar/system/healthcheck-{self.advertised_address}-{self.broker_port}"
        check = make_health_check(
            host,
            self.broker_port,
            topic,
            clock=self.clock,
            rng=self.rng.fork("health"),
            credentials=broker_client_credentials(self.config.properties),
        )
        front = WebFront(svc, health_check=check)
        front.state.request_stop = self.request_stop  # POST /admin/v2/brokers/shutdown (web/load_balance.py)
        register_bookie_metrics(front, self._storage.parts.get("bookie") if self._storage else None)
        if self.plugins is not None and self.plugins.ext.servlets:  # mounted on the app: build it now
            self._plugin_step(self.plugins.mount, front.build_now(), svc)
        uv_config = uvicorn.Config(
            front,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="none",
            timeout_graceful_shutdown=int(HTTP_STOP_TIMEOUT_S),
        )
        self._http = _InLoopServer(uv_config)
        assert self._http_socket is not None
        self._http_task = asyncio.get_running_loop().create_task(
            self._http.serve(sockets=[self._http_socket]), name="standalone:http"
        )
        async with asyncio.timeout(HTTP_START_TIMEOUT_S):
            while not self._http.started:
                if self._http_task.done():
                    self._http_task.result()  # raises the start failure
                    raise StandaloneError("the HTTP server stopped during start-up")
                await asyncio.sleep(0.005)

    # --- stop -----------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask ``run_until_stopped`` to shut down (safe from a signal handler on the loop)."""
        self._stop_requested.set()

    async def run_until_stopped(self) -> None:
        await self._stop_requested.wait()
        await self.aclose()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def aclose(self) -> None:
        if self.state is StandaloneState.STOPPED:
            return
        if self.state is StandaloneState.STOPPING:
            await self._closed.wait()
            return
        if self.state is StandaloneState.NEW:
            self._move(StandaloneState.STOPPED)
            self._closed.set()
            return
        await self._shutdown()

    async def _shutdown(self) -> None:
        self._move(StandaloneState.STOPPING)
        if self._preload_task is not None:
            self._preload_task.cancel()
        # brokerShutdownTimeoutMs bounds the whole graceful stop (Pulsar's meaning: after it
        # the process goes anyway); each stage also has its own bound.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._shutdown_timeout_s()

        def within(stage_s: float) -> float:
            return max(0.0, min(stage_s, deadline - loop.time()))

        try:
            if self.plugins is not None:
                await _bounded("plugins", self.plugins.aclose(), within(HTTP_STOP_TIMEOUT_S))
            if self.functions_worker is not None:
                await _bounded(
                    "functions worker", self.functions_worker.aclose(), within(BROKER_STOP_TIMEOUT_S)
                )
            await self._stop_http()
            if self.tls is not None:
                await self.tls.aclose()
            if self.broker_service is not None:
                await _bounded("broker service", self.broker_service.aclose(), within(BROKER_STOP_TIMEOUT_S))
            if self._storage is not None and self._owns_storage:
                # the storage's own last writes (ledger closes, cursor snapshots) get a few
                # seconds even when the stages before used up the budget
                await _bounded("storage", self._storage.aclose(), max(within(STORAGE_STOP_TIMEOUT_S), 5.0))
        finally:
            if self._http_socket is not None:
                self._http_socket.close()
            self._move(StandaloneState.STOPPED)
            self._closed.set()

    def _shutdown_timeout_s(self) -> float:
        """brokerShutdownTimeoutMs (Pulsar's default 60 s); 0 or less: the stages' own bounds."""
        svc = self.broker_service
        ms = svc.config.broker_shutdown_timeout_ms if svc is not None else 60_000
        if ms <= 0:
            return HTTP_STOP_TIMEOUT_S + 2 * BROKER_STOP_TIMEOUT_S + STORAGE_STOP_TIMEOUT_S
        return ms / 1000.0

    async def _stop_http(self) -> None:
        if self._http is None or self._http_task is None:
            return
        self._http.should_exit = True
        try:
            async with asyncio.timeout(HTTP_STOP_TIMEOUT_S + 1):
                await asyncio.shield(self._http_task)
        except TimeoutError:
            self._http.force_exit = True
            self._http_task.cancel()
            await asyncio.gather(self._http_task, return_exceptions=True)
        except Exception:
            log.exception("the HTTP server failed")

    async def __aenter__(self) -> Standalone:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _bounded(what: str, coro: Any, timeout_s: float) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            await coro
    except TimeoutError:
        log.error("closing the %s took longer than %.0f s; giving up on it", what, timeout_s)
    except Exception:
        log.exception("closing the %s failed", what)


def _bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise StandaloneError(f"cannot listen on {host}:{port} for HTTP: {exc.strerror or exc}") from exc
    return sock
