"""A replicator's producer on a remote cluster, spoken straight in the binary protocol.

Theory of operation: a :class:`RemoteProducer` is one TCP connection to a
broker of the remote cluster driven through the sans-IO
:class:`~magnetar.protocol.client_connection.ClientConnection`:

    open():  TCP connect (a multi-host ``pulsar://h1:p1,h2:p2`` -- a cluster
             registered with every broker -- is tried host by host until one
             answers) -> CONNECT/CONNECTED -> LOOKUP (a Redirect answer
             reconnects to the named broker, at most MAX_REDIRECTS times)
             -> PRODUCER (name ``pulsar.repl.<local cluster>``) -> PRODUCER_SUCCESS
    schema_version_for(schema): GET_OR_CREATE_SCHEMA -> the remote's version
             bytes for that schema (registered there if new);
    send():  one SEND frame of stored headers-and-payload; the returned future
             resolves with the (ledger, entry) of the SEND_RECEIPT, or fails
             with RemoteProducerError on SEND_ERROR / close / connection loss.

Why not ``magnetar.client``: the broker and the client never import each
other (an import-linter contract), and a replicator needs what the client's
public producer deliberately hides: sending a *stored entry* as it is (a
batch stays one batch, compressed bytes stay compressed, the original
producer name, sequence id and publish time stay in the metadata), which is
one SEND frame here.  The protocol layer below both has every builder needed.

Receipts arrive in SEND order (one connection, one producer), so pending
sends are a FIFO; anything other than the head's receipt is a protocol
error and closes the connection.  Every wait is bounded
(``REQUEST_TIMEOUT_S``); the owner (the replicator) reconnects with backoff.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any
from urllib.parse import urlparse

from magnetar.protocol import client_commands
from magnetar.protocol.client_connection import ClientConnection
from magnetar.protocol.enums import CommandType, LookupType
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectRejected,
    PingReceived,
    ResponseReceived,
)
from magnetar.protocol.wire import WireSchema
from magnetar.runtime import Clock, wait_for

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
MAX_REDIRECTS = 5
READ_CHUNK_BYTES = 1 << 16
CLIENT_VERSION = "magnetar-replicator"


class RemoteProducerError(Exception):
    """The remote producer could not be opened, or a send failed."""


class RemoteProducer:
    def __init__(
        self,
        clock: Clock,
        service_url: str,
        topic: str,
        producer_name: str,
        credentials: tuple[str, bytes] | None = None,
    ) -> None:
        """``credentials``: (auth method, auth data) of the broker's client identity
        (``brokerClientAuthenticationPlugin``/``...Parameters``), or None."""
        self.clock = clock
        self.credentials = credentials
        self.service_url = service_url
        self.topic = topic
        self.producer_name = producer_name
        self.connected_since_ms: int | None = None
        self.remote_address = ""
        self._conn: ClientConnection | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._responses: dict[tuple[CommandType, int], asyncio.Future[Any]] = {}
        self._pending: collections.deque[asyncio.Future[tuple[int, int]]] = collections.deque()
        self._seq = 0
        self._producer_id = 1
        self._closed = asyncio.Event()
        self.failure: str | None = None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._closed.is_set() and self.connected_since_ms is not None

    @property
    def pending(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------ open
    async def open(self) -> None:
        await self._connect_any(self.service_url)
        for _ in range(MAX_REDIRECTS + 1):
            frame = await self._request(
                CommandType.LOOKUP, lambda rid: client_commands.lookup(self.topic, rid, authoritative=True)
            )
            cmd = frame.command
            if cmd.response == LookupType.Redirect and cmd.brokerServiceUrl:
                await self.close("redirected")
                self._closed = asyncio.Event()
                await self._connect(cmd.brokerServiceUrl)
                continue
            break
        else:
            raise RemoteProducerError(f"too many lookup redirects for {self.topic}")
        await self._request(
            CommandType.PRODUCER,
            lambda rid: client_commands.producer(
                self.topic, self._producer_id, rid, self.producer_name, user_provided_producer_name=True
            ),
        )
        self.connected_since_ms = self.clock.time_ms()

    async def _connect_any(self, url: str) -> str:
        """Connect to the first host of a (multi-host) service URL that answers; its URL."""
        scheme, sep, hosts = url.partition("://")
        candidates = [f"{scheme}://{h.strip()}" for h in hosts.split(",") if h.strip()] if sep else [url]
        failure: RemoteProducerError | None = None
        for candidate in candidates or [url]:
            try:
                await self._connect(candidate)
                return candidate
            except RemoteProducerError as exc:
                failure = exc
                await self.close("trying the next host")
                self._closed = asyncio.Event()
                self.failure = None
        assert failure is not None
        raise failure

    async def _connect(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.scheme != "pulsar" or not parsed.hostname or not parsed.port:
            raise RemoteProducerError(f"unsupported remote broker URL {url!r} (pulsar://host:port)")
        try:
            self._reader, self._writer = await wait_for(
                self.clock, asyncio.open_connection(parsed.hostname, parsed.port), REQUEST_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            raise RemoteProducerError(f"cannot connect to {url}: {exc}") from None
        self.remote_address = f"{parsed.hostname}:{parsed.port}"
        self._conn = ClientConnection()
        connected: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._responses[(CommandType.CONNECT, 0)] = connected
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop(), name=f"repl-read:{url}")
        method, data = self.credentials or ("none", None)
        self._write(
            self._conn.connect(client_version=CLIENT_VERSION, auth_method_name=method, auth_data=data)
        )
        try:
            await wait_for(self.clock, connected, REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise RemoteProducerError(f"{url}: no CONNECTED within {REQUEST_TIMEOUT_S}s") from None

    async def _request(self, kind: CommandType, build: Any) -> Any:
        conn = self._require()
        rid = conn.new_request_id()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._responses[(kind, rid)] = fut
        self._write(conn.send_request(kind, rid, build(rid)))
        try:
            return await wait_for(self.clock, fut, REQUEST_TIMEOUT_S)
        except TimeoutError:
            conn.forget_request(kind, rid)
            raise RemoteProducerError(
                f"{kind.name} on {self.topic}: no answer in {REQUEST_TIMEOUT_S}s"
            ) from None
        finally:
            self._responses.pop((kind, rid), None)

    async def schema_version_for(self, schema: WireSchema) -> bytes:
        """The remote topic's version of ``schema`` (GET_OR_CREATE_SCHEMA registers it there
        under the remote's compatibility rules; an incompatible schema fails the request)."""
        frame = await self._request(
            CommandType.GET_OR_CREATE_SCHEMA,
            lambda rid: client_commands.get_or_create_schema(rid, self.topic, schema),
        )
        return bytes(frame.command.schema_version)

    # ------------------------------------------------------------ send
    def send(self, headers_and_payload: bytes, num_messages: int) -> asyncio.Future[tuple[int, int]]:
        conn = self._require()
        fut: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        seq = self._seq
        self._seq += 1
        self._pending.append(fut)
        self._write(
            conn.send(client_commands.send(self._producer_id, seq, headers_and_payload, num_messages))
        )
        return fut

    async def drain(self) -> None:
        """Wait for the socket's write buffer (back-pressure)."""
        if self._writer is not None and not self._closed.is_set():
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()

    # ------------------------------------------------------------ input
    async def _read_loop(self) -> None:
        assert self._reader is not None and self._conn is not None
        reason = "connection closed by the remote broker"
        try:
            while True:
                data = await self._reader.read(READ_CHUNK_BYTES)
                self._conn.receive_data(data)
                while (event := self._conn.next_event()) is not None:
                    if isinstance(event, ConnectionClosed):
                        raise ConnectionError(reason)
                    self._on_event(event)
        except (ConnectionError, ProtocolError, RemoteProducerError) as exc:
            reason = str(exc) or reason
        except asyncio.CancelledError:
            reason = "closed"
        finally:
            self._fail_all(reason)

    def _on_event(self, event: Any) -> None:
        if isinstance(event, Connected):
            self._resolve((CommandType.CONNECT, 0), event)
        elif isinstance(event, ConnectRejected):
            self._reject((CommandType.CONNECT, 0), f"CONNECT refused: {event.message}")
        elif isinstance(event, PingReceived):
            self._write(event.reply)
        elif isinstance(event, ResponseReceived):
            key = (event.kind, event.request_id)
            if event.is_error:
                cmd = event.frame.command
                self._reject(key, f"{event.kind.name} failed: {getattr(cmd, 'message', '') or cmd}")
            elif event.final:
                self._resolve(key, event.frame)
        elif isinstance(event, CommandReceived):
            self._on_command(event)

    def _on_command(self, event: CommandReceived) -> None:
        cmd: Any = event.frame.command
        if event.type is CommandType.AUTH_CHALLENGE:  # the remote refreshes: same credentials again
            method, data = self.credentials or ("none", b"")
            conn = self._require()
            self._write(conn.send_auth_response(client_commands.auth_response(CLIENT_VERSION, method, data)))
        elif event.type is CommandType.SEND_RECEIPT:
            if not self._pending:
                raise RemoteProducerError("SEND_RECEIPT with nothing pending")
            fut = self._pending.popleft()
            if not fut.done():
                fut.set_result((int(cmd.message_id.ledgerId), int(cmd.message_id.entryId)))
        elif event.type is CommandType.SEND_ERROR:
            raise RemoteProducerError(f"SEND_ERROR: {cmd.message}")
        elif event.type is CommandType.CLOSE_PRODUCER:
            raise RemoteProducerError("the remote broker closed the producer")

    def _resolve(self, key: tuple[CommandType, int], value: Any) -> None:
        fut = self._responses.get(key)
        if fut is not None and not fut.done():
            fut.set_result(value)

    def _reject(self, key: tuple[CommandType, int], message: str) -> None:
        fut = self._responses.get(key)
        if fut is not None and not fut.done():
            fut.set_exception(RemoteProducerError(message))

    def _fail_all(self, reason: str) -> None:
        self.failure = reason
        self._closed.set()
        self.connected_since_ms = None
        err = RemoteProducerError(reason)
        for fut in list(self._responses.values()) + list(self._pending):
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: the owner sees the failure through its own await
        self._pending.clear()
        if self._writer is not None:
            self._writer.close()

    # ------------------------------------------------------------ plumbing
    def _require(self) -> ClientConnection:
        if self._conn is None or self._closed.is_set():
            raise RemoteProducerError(self.failure or "not connected")
        return self._conn

    def _write(self, data: bytes) -> None:
        if self._writer is not None and not self._closed.is_set():
            self._writer.write(data)

    async def close(self, reason: str = "closed") -> None:
        task = self._read_task
        self._read_task = None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._fail_all(reason)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await wait_for(self.clock, self._writer.wait_closed(), 2.0)
