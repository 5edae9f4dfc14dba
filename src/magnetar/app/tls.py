"""TLS listeners of a standalone broker: ``brokerServicePortTls`` and ``webServicePortTls``.

Theory of operation: when ``tlsCertificateFilePath`` / ``tlsKeyFilePath`` and a
TLS port are configured, :func:`start_tls_listeners` starts

* the binary protocol over TLS (``pulsar+ssl://``) through
  ``BrokerService.serve_tls`` -- the broker then advertises ``brokerUrlTls``
  in lookups and closes the listener with its other servers;
* HTTPS: a second uvicorn server over the *same* FastAPI app as plain HTTP,
  with the SSLContext built by ``broker.auth.tls`` (client certificates
  requested when ``tlsTrustCertsFilePath`` is set, required with
  ``tlsRequireTrustedClientCertOnConnect``).

ASGI does not carry the peer certificate, so the HTTPS server speaks h11
through :func:`peer_recording_protocol`, which records each connection's
client certificate (DER) in a :class:`PeerCertRegistry` keyed by (client
address, server address) while the connection is open; the app's auth
middleware reads it through ``app.state.tls_peer_lookup``.  The registry is
bounded by the number of open connections (entries go on ``connection_lost``)
plus a hard cap.

:func:`broker_client_credentials` turns ``brokerClientAuthenticationPlugin`` /
``brokerClientAuthenticationParameters`` into the CONNECT credentials of the
broker's own health-check client.

Port 0 picks a free port; the chosen ports are on the returned
:class:`TlsListeners` and logged (the single ready line stays
``magnetar ready: pulsar://... http://...``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from magnetar.broker.auth.tls import peer_certificate, server_ssl_context_from_config

log = logging.getLogger(__name__)

HTTPS_START_TIMEOUT_S = 10.0
HTTPS_STOP_TIMEOUT_S = 5.0
MAX_RECORDED_PEERS = 10_000

Address = tuple[Any, ...]


class PeerCertRegistry:
    """Client certificate (DER) of each open HTTPS connection, by (client, server) address."""

    def __init__(self, max_entries: int = MAX_RECORDED_PEERS) -> None:
        self._certs: dict[tuple[Address, Address], bytes] = {}
        self._max_entries = max_entries

    def record(self, client: Address | None, server: Address | None, cert: bytes | None) -> None:
        if client is None or server is None or cert is None:
            return
        if len(self._certs) >= self._max_entries:
            return  # beyond the cap a connection is served without certificate authentication
        self._certs[(tuple(client), tuple(server))] = cert

    def forget(self, client: Address | None, server: Address | None) -> None:
        if client is not None and server is not None:
            self._certs.pop((tuple(client), tuple(server)), None)

    def lookup(self, client: Address, server: Address | None = None) -> bytes | None:
        if server is not None:
            return self._certs.get((tuple(client), tuple(server)))
        for (c, _s), cert in self._certs.items():
            if c == tuple(client):
                return cert
        return None

    def __len__(self) -> int:
        return len(self._certs)


def peer_recording_protocol(registry: PeerCertRegistry) -> type[H11Protocol]:
    class PeerRecordingH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            ssl_object = transport.get_extra_info("ssl_object")
            if ssl_object is not None:
                registry.record(self.client, self.server, peer_certificate(ssl_object))

        def connection_lost(self, exc: Exception | None) -> None:
            registry.forget(self.client, self.server)
            super().connection_lost(exc)

    return PeerRecordingH11Protocol


class _InLoopServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class TlsListeners:
    def __init__(self) -> None:
        self.broker_port_tls: int | None = None
        self.web_port_tls: int | None = None
        self.peers = PeerCertRegistry()
        self._https: _InLoopServer | None = None
        self._https_task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    async def aclose(self) -> None:
        """Stop HTTPS (the binary TLS listener is closed by the BrokerService)."""
        if self._https is not None and self._https_task is not None:
            self._https.should_exit = True
            try:
                async with asyncio.timeout(HTTPS_STOP_TIMEOUT_S + 1):
                    await asyncio.shield(self._https_task)
            except TimeoutError:
                self._https.force_exit = True
                self._https_task.cancel()
                await asyncio.gather(self._https_task, return_exceptions=True)
            except Exception:
                log.exception("the HTTPS server failed")
        if self._socket is not None:
            self._socket.close()


async def start_tls_listeners(svc: Any, app: Any, bind_address: str) -> TlsListeners | None:
    """Start what the config asks for; None when no TLS port is configured."""
    cfg = svc.auth_config
    if cfg.broker_service_port_tls is None and cfg.web_service_port_tls is None:
        return None
    listeners = TlsListeners()
    try:
        if cfg.broker_service_port_tls is not None:
            await svc.serve_tls(bind_address, cfg.broker_service_port_tls)
            listeners.broker_port_tls = svc.broker_port_tls
            log.info("binary protocol over TLS on port %s", listeners.broker_port_tls)
        if cfg.web_service_port_tls is not None:
            await _start_https(listeners, app, bind_address, cfg)
            log.info("HTTPS on port %s", listeners.web_port_tls)
    except BaseException:
        await listeners.aclose()
        raise
    return listeners


async def _start_https(listeners: TlsListeners, app: Any, bind_address: str, cfg: Any) -> None:
    ctx = server_ssl_context_from_config(cfg)
    family = socket.AF_INET6 if ":" in bind_address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    listeners._socket = sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind_address, cfg.web_service_port_tls))
    sock.listen(1024)
    sock.setblocking(False)
    listeners.web_port_tls = sock.getsockname()[1]
    app.state.tls_peer_lookup = listeners.peers.lookup
    uv_config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        loop="none",
        http=peer_recording_protocol(listeners.peers),
        timeout_graceful_shutdown=int(HTTPS_STOP_TIMEOUT_S),
    )
    uv_config.load()
    uv_config.ssl = ctx  # ours (client-certificate policy from the tls* keys), not uvicorn's
    server = _InLoopServer(uv_config)
    listeners._https = server
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name="standalone:https")
    listeners._https_task = task
    async with asyncio.timeout(HTTPS_START_TIMEOUT_S):
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the HTTPS server stopped during start-up")
            await asyncio.sleep(0.005)


# --- the broker's own client credentials (the health check's CONNECT) ------------------------

_TOKEN_PLUGINS = ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken")
_BASIC_PLUGINS = ("basic", "org.apache.pulsar.client.impl.auth.AuthenticationBasic")


class BrokerClientAuthError(ValueError):
    """brokerClientAuthenticationPlugin / Parameters cannot be used."""


def broker_client_credentials(props: dict[str, str]) -> tuple[str, bytes] | None:
    """(auth method, auth data) for the broker's internal clients, from Pulsar's keys.

    ``brokerClientAuthenticationPlugin`` = the token or basic client plugin;
    ``brokerClientAuthenticationParameters`` = ``token:<jwt>`` / ``file://<path>`` /
    ``{"token": ...}`` for tokens, ``{"userId": ..., "password": ...}`` for basic.
    None when no plugin is configured (the health check then connects without
    credentials).  The role should be a super-user, as in Pulsar.  Reads a token
    file: call at startup.
    """
    plugin = (props.get("brokerClientAuthenticationPlugin") or "").strip()
    params = (props.get("brokerClientAuthenticationParameters") or "").strip()
    if not plugin or plugin.endswith("AuthenticationDisabled"):
        return None
    if plugin in _TOKEN_PLUGINS:
        return "token", _token_param(params).encode()
    if plugin in _BASIC_PLUGINS:
        doc = _json_params(params)
        user, password = str(doc.get("userId", "")), str(doc.get("password", ""))
        if not user:
            raise BrokerClientAuthError("brokerClientAuthenticationParameters needs userId and password")
        return "basic", f"{user}:{password}".encode()
    raise BrokerClientAuthError(f"unsupported brokerClientAuthenticationPlugin {plugin!r} (token or basic)")


def _token_param(params: str) -> str:
    if params.startswith("{"):
        params = str(_json_params(params).get("token", ""))
    if params.startswith("token:"):
        return params[len("token:") :].strip()
    if params.startswith("file://"):
        try:
            with open(params[len("file://") :], encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            raise BrokerClientAuthError(f"cannot read the broker client token: {exc}") from exc
    if params:
        return params
    raise BrokerClientAuthError("brokerClientAuthenticationParameters is empty")


def _json_params(params: str) -> dict[str, Any]:
    try:
        doc = json.loads(params)
    except ValueError as exc:
        raise BrokerClientAuthError(f"brokerClientAuthenticationParameters is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise BrokerClientAuthError("brokerClientAuthenticationParameters must be a JSON object")
    return doc
