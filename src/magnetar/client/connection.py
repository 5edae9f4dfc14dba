"""One TCP (or TLS) connection to a broker: asyncio streams around the sans-IO ClientConnection.

Theory of operation: :class:`ClientCnx` owns a socket and a
``protocol.ClientConnection``. ``open()`` connects (bounded by the connection
timeout), writes CONNECT with the authentication data, and waits for CONNECTED
(an ERROR there becomes the typed exception, e.g. ``AuthenticationError``).
Then every received chunk goes, in the socket protocol's ``data_received``
(``cnx_wire.Wire``: no reader task, no extra copy), to the state machine,
whose events are routed at once by ``cnx_dispatch.CommandRouter``: answers
complete the futures of requests, commands go to the producer, consumer or
watcher registered under their id (``add_producer`` / ``add_consumer`` /
``add_watcher``), PING is answered, AUTH_CHALLENGE gets fresh auth data.
``request(kind, build)`` picks a request id, writes ``build(request_id)`` and
waits on a future keyed by ``(kind, request_id)``, never longer than the
operation timeout (then the request is forgotten and ``Timeout`` raised); an
error answer raises the typed ``ServerError`` exception.

A keep-alive task ticks the state machine every ``keepalive_s``: it sends
PING, or closes the connection when the previous PING got no traffic back.
When the connection ends for any reason, every pending request fails with
``ConnectError`` and every handler's ``connection_closed(cnx)`` is called once
so producers and consumers reconnect (they own their reconnect loops; this
class never reconnects).

Writes are coalesced: frames written during one turn of the event loop
(a burst of unbatched sends, a FLOW and an ACK, a SUBSCRIBE and its FLOW) are
kept in order and go to the socket as one ``transport.write`` when the turn
ends (``call_soon``), so a burst costs one system call and one wake-up of the
broker instead of one per frame. Once ``COALESCE_MAX_BYTES`` are waiting they
are written at once (bulk data is not held back). Senders of bulk data call
``drain()``, which waits while the transport asked us to pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

from magnetar.client.cnx_dispatch import CommandRouter, Handler
from magnetar.client.cnx_setup import ConnectionConfig, make_ssl_context, split_host_port
from magnetar.client.cnx_wire import Wire
from magnetar.client.errors import ConnectError, PulsarException, Timeout, error_from_code
from magnetar.protocol import client_commands, server_commands
from magnetar.protocol.client_connection import ClientConnection
from magnetar.protocol.enums import CLIENT_DEFAULT_MAX_MESSAGE_SIZE, CommandType
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectRejected,
    KeepaliveAction,
)
from magnetar.protocol.frames import Frame

__all__ = ["ClientCnx", "ConnectionConfig", "Handler", "make_ssl_context", "split_host_port"]

log = logging.getLogger(__name__)
T = CommandType
COALESCE_MAX_BYTES = 64 * 1024


class ClientCnx(CommandRouter):
    """A connection to one broker (``logical``), reached at ``physical`` (the same unless proxied)."""

    def __init__(self, logical: str, physical: str, config: ConnectionConfig) -> None:
        self.logical = logical
        self.physical = physical
        self.config = config
        self._conn = ClientConnection(keepalive_interval_s=config.keepalive_s)
        self._wire: Wire | None = None
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out: list[bytes] = []  # frames written in this loop turn, sent together when it ends
        self._out_bytes = 0
        self._handshake: asyncio.Future[None] | None = None
        self._pending: dict[tuple[CommandType, int], asyncio.Future[Frame]] = {}
        self._producers: dict[int, Handler] = {}
        self._consumers: dict[int, Handler] = {}
        self._watchers: dict[int, Handler] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = asyncio.Event()
        self.close_reason: BaseException | None = None
        self.max_message_size = CLIENT_DEFAULT_MAX_MESSAGE_SIZE
        self.server_version = ""
        self.server_features: frozenset[str] = frozenset()  # CONNECTED's feature flags set to true

    # ------------------------------------------------------------------ lifecycle
    @property
    def is_closed(self) -> bool:
        return self._closed.is_set()

    async def open(self) -> None:
        host, port = split_host_port(self.physical)
        ssl_ctx = self.config.ssl_context
        loop = self._loop = asyncio.get_running_loop()
        self._handshake = loop.create_future()
        try:
            transport, wire = await asyncio.wait_for(
                loop.create_connection(
                    lambda: Wire(self), host, port, ssl=ssl_ctx, server_hostname=host if ssl_ctx else None
                ),
                self.config.connection_timeout_s,
            )
        except TimeoutError:
            raise ConnectError(f"connecting to {self.physical} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(f"cannot connect to {self.physical}: {exc}") from None
        self._transport, self._wire = transport, wire
        auth = self.config.authentication
        proxy_to = None if self.logical == self.physical else self.logical.split("://", 1)[-1]
        try:
            transport.write(
                self._conn.connect(
                    client_version=self.config.client_version,
                    auth_method_name=auth.auth_method_name,
                    auth_data=await auth.auth_data(),
                    proxy_to_broker_url=proxy_to,
                    supports_topic_watchers=True,
                )
            )
            await asyncio.wait_for(asyncio.shield(self._handshake), self.config.connection_timeout_s)
        except TimeoutError:
            self._abort()
            raise ConnectError(f"{self.physical} sent no CONNECTED in time") from None
        except BaseException:
            self._abort()
            raise
        self._tasks.append(asyncio.create_task(self._keepalive_loop(), name=f"cnx-keepalive {self.physical}"))

    def _on_handshake_event(self, event: Any) -> None:
        hs = self._handshake
        assert hs is not None
        if isinstance(event, Connected):
            if event.max_message_size:
                self.max_message_size = event.max_message_size
            self.server_version = event.server_version
            self.server_features = event.feature_flags
            if not hs.done():
                hs.set_result(None)
        elif isinstance(event, ConnectRejected):
            if not hs.done():
                hs.set_exception(error_from_code(event.error, event.message))
        elif isinstance(event, ConnectionClosed):
            if not hs.done():
                hs.set_exception(ConnectError(f"{self.physical} closed the connection during the handshake"))
        elif isinstance(event, CommandReceived) and event.type is T.AUTH_CHALLENGE:
            asyncio.get_running_loop().create_task(self._answer_challenge_safely())

    async def _answer_challenge(self) -> None:
        auth = self.config.authentication
        data = await auth.auth_data()
        self.write(
            self._conn.send_auth_response(
                client_commands.auth_response(self.config.client_version, auth.auth_method_name, data or b"")
            )
        )

    def _abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    async def close(self) -> None:
        """Close the socket; handlers are told, pending requests fail. Idempotent."""
        self._shutdown(None)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task

    def _shutdown(self, reason: BaseException | None) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.close_reason = reason
        self._conn.close()
        if self._transport is not None:
            if reason is None:
                self._flush_out()  # a graceful close still sends what was written before it
            self._transport.close()
        hs = self._handshake
        if hs is not None and not hs.done():
            hs.set_exception(ConnectError(f"connection to {self.physical} lost during the handshake"))
            hs.exception()
        err = ConnectError(f"connection to {self.physical} closed" + (f": {reason}" if reason else ""))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        handlers = [*self._producers.values(), *self._consumers.values(), *self._watchers.values()]
        self._producers.clear()
        self._consumers.clear()
        self._watchers.clear()
        for handler in handlers:
            try:
                handler.connection_closed(self)
            except Exception:  # one handler's bug must not keep the others from reconnecting
                log.exception("connection_closed handler failed")

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # ------------------------------------------------------------------ handlers
    def add_producer(self, producer_id: int, handler: Handler) -> None:
        self._check_open()
        self._producers[producer_id] = handler

    def remove_producer(self, producer_id: int) -> None:
        self._producers.pop(producer_id, None)

    def add_consumer(self, consumer_id: int, handler: Handler) -> None:
        self._check_open()
        self._consumers[consumer_id] = handler

    def remove_consumer(self, consumer_id: int) -> None:
        self._consumers.pop(consumer_id, None)

    def add_watcher(self, watcher_id: int, handler: Handler) -> None:
        self._check_open()
        self._watchers[watcher_id] = handler

    def remove_watcher(self, watcher_id: int) -> None:
        self._watchers.pop(watcher_id, None)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise ConnectError(f"connection to {self.physical} is closed")

    # ------------------------------------------------------------------ output
    def write(self, data: bytes) -> None:
        self._check_open()
        self._put(self._conn.send(data))

    def _put(self, data: bytes) -> None:
        """Queue one encoded frame for the end of this loop turn (at once past COALESCE_MAX_BYTES)."""
        out = self._out
        if not out:
            self._loop.call_soon(self._flush_out)  # type: ignore[union-attr]
        out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= COALESCE_MAX_BYTES:
            self._flush_out()

    def _flush_out(self) -> None:
        out = self._out
        if not out:
            return
        self._out, self._out_bytes = [], 0
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(out[0] if len(out) == 1 else b"".join(out))

    @property
    def write_buffer_size(self) -> int:
        return self._out_bytes + (self._transport.get_write_buffer_size() if self._transport else 0)

    async def drain(self) -> None:
        if self._wire is not None and not self._closed.is_set():
            await self._wire.drain()

    async def request(self, kind: CommandType, build: Any, timeout_s: float | None = -1.0) -> Frame:
        """Send ``build(request_id)`` and wait for its answer (typed error on failure)."""
        self._check_open()
        rid = self._conn.new_request_id()
        fut: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._put(self._conn.send_request(kind, rid, build(rid)))
        self._pending[(kind, rid)] = fut
        limit = self.config.operation_timeout_s if timeout_s == -1.0 else timeout_s
        try:
            return await asyncio.wait_for(asyncio.shield(fut), limit)
        except TimeoutError:
            self._pending.pop((kind, rid), None)
            self._conn.forget_request(kind, rid)
            raise Timeout(f"{kind.name} to {self.physical} got no answer in {limit} s") from None

    def new_request_id(self) -> int:
        return self._conn.new_request_id()

    # ------------------------------------------------------------------ input
    def _on_data(self, data: bytes) -> None:
        """Called by the protocol for every received chunk (``b""`` at EOF)."""
        if self._closed.is_set():
            return
        try:
            self._conn.receive_data(data)
            if self._handshake is not None and not self._handshake.done():
                while (event := self._conn.next_event()) is not None:
                    self._on_handshake_event(event)
                    if self._handshake.done():
                        break
                if not self._handshake.done() or self._handshake.exception() is not None:
                    return
            if not self._drain_events():
                self._shutdown(None)
        except (ProtocolError, PulsarException) as exc:
            self._shutdown(exc)
        except Exception as exc:  # a handler's bug: drop the connection, the reconnect starts clean
            log.exception("error handling data from %s", self.physical)
            self._shutdown(exc)

    async def _answer_challenge_safely(self) -> None:
        try:
            await self._answer_challenge()
        except Exception as exc:
            self._shutdown(exc)

    async def _keepalive_loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.config.keepalive_s
        while not self._closed.is_set():
            action = self._conn.keepalive_tick(loop.time())
            if action is KeepaliveAction.SEND_PING:
                self.write(server_commands.ping())
            elif action is KeepaliveAction.CLOSE:
                self._shutdown(ConnectError(f"no answer to keep-alive PING from {self.physical}"))
                return
            await asyncio.sleep(interval)
