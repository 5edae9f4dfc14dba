"""The proxy process: its listeners, its shared context, its lifecycle.

Theory of operation: :class:`ProxyServer` builds a :class:`ProxyContext`
(config, broker discovery, the authentication service, the proxy's own
credentials towards brokers, counters, the lookup bound) and starts two
listeners on ``bindAddress``: the binary port (``servicePort``; each accepted
socket becomes a :class:`~magnetar.proxy.connection.ProxyConnection` run in a
task the server owns) and the HTTP port (``webServicePort``, uvicorn in this
loop).  ``maxConcurrentInboundConnections`` bounds the binary connections; one
more is closed at once.  ``start`` returns once both listen (ports 0 are
resolved, see ``service_url`` / ``web_url``); ``aclose`` stops accepting,
cancels the connection tasks and awaits them, stops HTTP, closes the
metadata store.  States: NEW -> RUNNING -> CLOSED (``aclose`` is idempotent).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from magnetar.proxy.config import ProxyConfig
from magnetar.proxy.connection import ProxyConnection
from magnetar.proxy.discovery import BrokerDiscovery
from magnetar.proxy.web import FORWARD_TIMEOUT_S, create_proxy_app

log = logging.getLogger(__name__)
HTTP_START_TIMEOUT_S = 30.0


class ProxyState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


@dataclass
class ProxyContext:
    config: ProxyConfig
    discovery: BrokerDiscovery
    authentication: Any  # broker.auth.AuthenticationService or None
    broker_credentials: tuple[str, bytes] | None
    lookup_slots: asyncio.Semaphore
    stats: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def connect_timeout_s(self) -> float:
        return self.config.connect_timeout_ms / 1000


class _InLoopServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the process owner handles signals
        yield


class ProxyServer:
    def __init__(self, properties: Mapping[str, str], *, clock: Any = None) -> None:
        from magnetar.runtime import RealClock

        self.properties = dict(properties)
        self.config = ProxyConfig.from_properties(self.properties)  # ProxyConfigError on bad keys
        self.clock = clock or RealClock()
        self.state = ProxyState.NEW
        self.ctx: ProxyContext | None = None
        self._store: Any = None
        self._server: asyncio.Server | None = None
        self._http: _InLoopServer | None = None
        self._http_task: asyncio.Task[None] | None = None
        self._http_client: httpx.AsyncClient | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.service_port = 0
        self.web_port = 0
        self._stopped = asyncio.Event()

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.config.advertised_address}:{self.service_port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.config.advertised_address}:{self.web_port}"

    @property
    def ready_line(self) -> str:
        return f"magnetar proxy ready: {self.service_url} {self.web_url}"

    async def start(self) -> None:
        if self.state is not ProxyState.NEW:
            raise RuntimeError(f"cannot start a proxy in state {self.state.value}")
        try:
            await self._start()
        except BaseException:
            await self.aclose()
            raise
        self.state = ProxyState.RUNNING

    async def _start(self) -> None:
        from magnetar.app.tls import broker_client_credentials
        from magnetar.broker.auth import AuthConfig
        from magnetar.broker.auth.service import AuthenticationService
        from magnetar.metadata.factory import create_metadata_store

        cfg = self.config
        if cfg.metadata_store_url:
            self._store = await create_metadata_store(
                cfg.metadata_store_url, clock=self.clock, session_timeout_ms=cfg.metadata_session_timeout_ms
            )
        auth_config = AuthConfig.from_properties(self.properties)
        authn = (
            AuthenticationService.from_config(auth_config, self.clock) if cfg.authentication_enabled else None
        )
        self.ctx = ProxyContext(
            config=cfg,
            discovery=BrokerDiscovery(cfg, self._store),
            authentication=authn,
            broker_credentials=broker_client_credentials(self.properties),
            lookup_slots=asyncio.Semaphore(cfg.max_concurrent_lookup_requests),
        )
        self._server = await asyncio.start_server(self._accept, cfg.bind_address, cfg.service_port)
        self.service_port = self._server.sockets[0].getsockname()[1]
        await self._start_http()

    async def _start_http(self) -> None:
        assert self.ctx is not None
        sock = socket.socket(socket.AF_INET6 if ":" in self.config.bind_address else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.bind_address, self.config.web_service_port))
        sock.listen(128)
        sock.setblocking(False)
        self.web_port = sock.getsockname()[1]
        self._http_client = httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S, follow_redirects=True)
        app = create_proxy_app(self.ctx, self._http_client)
        self._http = _InLoopServer(
            uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", loop="none")
        )
        self._http_task = asyncio.get_running_loop().create_task(
            self._http.serve(sockets=[sock]), name="proxy:http"
        )
        async with asyncio.timeout(HTTP_START_TIMEOUT_S):
            while not self._http.started:
                if self._http_task.done():
                    self._http_task.result()
                    raise RuntimeError("the proxy's HTTP server stopped during start-up")
                await asyncio.sleep(0.02)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.ctx is not None
        if len(self._connections) >= self.config.max_concurrent_inbound_connections:
            self.ctx.stats["connections_refused"] += 1
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ctx.stats["connections"] += 1
        self.ctx.stats["active_connections"] += 1
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await ProxyConnection(self.ctx, reader, writer).run()
        finally:
            self._connections.discard(task)
            self.ctx.stats["active_connections"] -= 1

    def request_stop(self) -> None:
        self._stopped.set()

    async def run_until_stopped(self) -> None:
        await self._stopped.wait()
        await self.aclose()

    async def aclose(self) -> None:
        if self.state is ProxyState.CLOSED:
            return
        self.state = ProxyState.CLOSED
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._http is not None and self._http_task is not None:
            self._http.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._http_task, 10)
        if self._http_client is not None:
            await self._http_client.aclose()
        if self.ctx is not None and self.ctx.authentication is not None:
            await self.ctx.authentication.aclose()
        if self._store is not None:
            await self._store.aclose()
