"""One client connection to the proxy: handshake, then lookups or a tunnel.

Theory of operation, in the order a connection lives:

1. The first frame must be CONNECT (within the connect timeout).  With
   ``authenticationEnabled`` the client's ``auth_method_name``/``auth_data``
   go through the broker's authentication service; the resulting role is
   the client's principal.  A refused credential is answered as the broker
   answers it (CONNECTED, then every request fails with AuthenticationError):
   the official client then fails at once instead of retrying CONNECT until
   its timeout.
2. CONNECT without ``proxy_to_broker_url`` -- a *lookup* connection.  The
   proxy answers CONNECTED itself and serves LOOKUP (following Redirects
   across brokers, at most ``MAX_REDIRECTS``; the answer is ``Connect`` to
   the owner with ``proxy_through_service_url=true``, so the client comes
   back to the proxy naming that owner), PARTITIONED_METADATA,
   GET_TOPICS_OF_NAMESPACE and GET_SCHEMA (relayed to a broker, the request
   id put back).  Each request runs in a task the connection owns (a slow
   lookup does not hold up the next); anything else that expects an answer
   gets ERROR.
3. CONNECT with ``proxy_to_broker_url`` -- a *tunnel*.  The target must be a
   broker the proxy knows (discovery or an answer to a lookup it made) or an
   allowed port; the proxy connects to it with a copy of the client's
   CONNECT (its feature flags and versions) whose credentials are the
   proxy's, the client's role in ``original_principal``, and the client's
   credential in ``original_auth_data`` when ``forwardAuthorizationCredentials``.
   The broker's CONNECTED (or ERROR) goes back to the client verbatim, and
   then two copy loops move bytes until either side closes.

The connection owns its links and tasks; ``run`` always closes them and both
sockets before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import MAX_PROTOCOL_VERSION, LookupType, ServerError
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.errors import RemoteProtocolError
from magnetar.protocol.frames import Frame, frame_from_base
from magnetar.proxy.discovery import NoBrokerAvailable
from magnetar.proxy.links import BrokerLink, BrokerLinkError, open_broker, read_frame, with_request_id

if TYPE_CHECKING:
    from magnetar.proxy.server import ProxyContext

log = logging.getLogger(__name__)

PROXY_VERSION = "Magnetar-Proxy-0.1"
SERVER_VERSION = "Pulsar Server 4.0.0-magnetar-proxy"
MAX_REDIRECTS = 8
COPY_CHUNK = 256 * 1024
_RELAYED = (T.PARTITIONED_METADATA, T.GET_TOPICS_OF_NAMESPACE, T.GET_SCHEMA)


class ProxyConnection:
    def __init__(self, ctx: ProxyContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.ctx = ctx
        self.reader, self.writer = reader, writer
        self.peer = writer.get_extra_info("peername")
        self.role: str | None = None
        self.rejection: str | None = None
        self._connect: Any = None
        self._links: dict[str, BrokerLink] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._link_lock = asyncio.Lock()

    # ------------------------------------------------------------------ life
    async def run(self) -> None:
        try:
            first = await asyncio.wait_for(
                read_frame(self.reader, self.ctx.config.max_message_size), self.ctx.connect_timeout_s
            )
            if first.type is not T.CONNECT:
                self.writer.write(cmds.error(-1, ServerError.ServiceNotReady, "expected CONNECT"))
                return
            self._connect = first.command
            await self._authenticate(first.command)
            if first.command.HasField("proxy_to_broker_url") and self.rejection is None:
                self.ctx.stats["tunnels"] += 1
                await self._tunnel(first)
            else:
                self.ctx.stats["lookup_connections"] += 1
                await self._serve_lookups()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, RemoteProtocolError) as exc:
            log.debug("proxy connection from %s ended: %s", self.peer, exc)
        except Exception:  # a bug here must close this connection, not the proxy
            self.ctx.stats["connection_errors"] += 1
            log.exception("proxy connection from %s failed", self.peer)
        finally:
            await self._close()

    async def _close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for link in self._links.values():
            await link.aclose()
        self._links.clear()
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    async def _authenticate(self, cmd: Any) -> None:
        authn = self.ctx.authentication
        if authn is None or not authn.enabled:
            return
        method = cmd.auth_method_name if cmd.HasField("auth_method_name") else None
        data = cmd.auth_data if cmd.HasField("auth_data") else b""
        try:
            result = await authn.authenticate(method, data)
        except Exception as exc:  # AuthenticationError and anything a provider raises
            self.rejection = getattr(exc, "message", None) or str(exc) or "Authentication failed"
            self.ctx.stats["auth_failures"] += 1
            log.info("proxy: authentication failed for %s: %s", self.peer, self.rejection)
            return
        self.role = result.role

    def _broker_connect_fields(self) -> dict[str, Any]:
        """What the proxy puts in its own CONNECT to a broker for this client."""
        method, data = self.ctx.broker_credentials or ("none", None)
        fields: dict[str, Any] = {"auth_method_name": method, "auth_data": data}
        if self.role is not None:
            fields["original_principal"] = self.role
            if self.ctx.config.forward_authorization_credentials and self._connect.HasField("auth_data"):
                fields["original_auth_data"] = self._connect.auth_data.decode("utf-8", "replace")
                fields["original_auth_method"] = self._connect.auth_method_name
        return fields

    # ------------------------------------------------------------------ lookups
    async def _serve_lookups(self) -> None:
        version = min(MAX_PROTOCOL_VERSION, max(0, self._connect.protocol_version))
        self.writer.write(
            cmds.connected(
                SERVER_VERSION,
                version,
                self.ctx.config.max_message_size - 10 * 1024,
                supports_get_partitioned_metadata_without_auto_creation=True,
            )
        )
        while True:
            frame = await read_frame(self.reader, self.ctx.config.max_message_size)
            if frame.type is T.PING:
                self.writer.write(cmds.pong())
            elif frame.type is T.PONG:
                continue
            elif frame.type is T.LOOKUP or frame.type in _RELAYED:
                if len(self._tasks) >= self.ctx.config.max_concurrent_lookup_requests:
                    self._fail(frame, ServerError.TooManyRequests, "too many lookups in flight")
                    continue
                task = asyncio.get_running_loop().create_task(self._answer(frame))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif _request_id(frame) is not None and self.rejection is not None:
                self._fail(frame, ServerError.AuthenticationError, self.rejection)
            elif _request_id(frame) is not None:
                self._fail(
                    frame, ServerError.NotAllowedError, f"the proxy does not serve {frame.type.name} here"
                )
            else:
                return  # a frame without a request on a lookup connection: the client is confused

    async def _answer(self, frame: Frame) -> None:
        if self.rejection is not None:
            self._fail(frame, ServerError.AuthenticationError, self.rejection)
            return
        try:
            async with self.ctx.lookup_slots:
                if frame.type is T.LOOKUP:
                    self.ctx.stats["lookups"] += 1
                    await self._lookup(frame)
                else:
                    self.ctx.stats["relayed"] += 1
                    link = await self._link(None)
                    response = await link.request(frame)
                    self.writer.write(with_request_id(response, frame.command.request_id))
        except (BrokerLinkError, NoBrokerAvailable) as exc:
            self.ctx.stats["lookup_failures"] += 1
            self._fail(frame, ServerError.ServiceNotReady, str(exc))

    async def _lookup(self, frame: Frame) -> None:
        topic, rid = frame.command.topic, frame.command.request_id
        link = await self._link(None)
        response = await link.request(lookup=(topic, False))
        for _ in range(MAX_REDIRECTS):
            cmd = response.command
            if cmd.response != LookupType.Redirect:
                break
            link = await self._link(cmd.brokerServiceUrl)
            response = await link.request(lookup=(topic, bool(cmd.authoritative)))
        cmd = response.command
        if cmd.response == LookupType.Connect:
            self.ctx.discovery.learn(cmd.brokerServiceUrl)
            self.writer.write(
                cmds.lookup_response(
                    rid,
                    LookupType.Connect,
                    broker_service_url=cmd.brokerServiceUrl,
                    broker_service_url_tls=cmd.brokerServiceUrlTls
                    if cmd.HasField("brokerServiceUrlTls")
                    else None,
                    authoritative=True,
                    proxy_through_service_url=True,
                )
            )
        elif cmd.response == LookupType.Redirect:
            self._fail(frame, ServerError.ServiceNotReady, f"more than {MAX_REDIRECTS} redirects for {topic}")
        else:
            self.writer.write(with_request_id(response, rid))

    async def _link(self, url: str | None) -> BrokerLink:
        """A link to ``url``, or (None) to any live broker: the first that accepts us."""
        async with self._link_lock:  # concurrent lookups share one link per broker
            return await self._link_locked(url)

    async def _link_locked(self, url: str | None) -> BrokerLink:
        if url is not None and url in self._links and not self._links[url].closed:
            return self._links[url]
        if url is None:
            for link in self._links.values():
                if not link.closed:
                    return link
        candidates = [url] if url is not None else []
        if url is None:
            for _ in range(max(1, len(await self.ctx.discovery.brokers()))):
                candidates.append((await self.ctx.discovery.next_broker()).service_url)
        error: Exception = NoBrokerAvailable("no broker available")
        for target in dict.fromkeys(candidates):
            link = BrokerLink(
                target, timeout_s=self.ctx.connect_timeout_s, max_frame_size=self.ctx.config.max_message_size
            )
            try:
                await link.open(client_version=PROXY_VERSION, **self._broker_connect_fields())
            except BrokerLinkError as exc:
                error = exc
                continue
            old = self._links.pop(target, None)
            if old is not None:
                await old.aclose()
            self._links[target] = link
            return link
        raise error

    def _fail(self, frame: Frame, error: ServerError, message: str) -> None:
        rid = _request_id(frame)
        if rid is None:
            return
        if frame.type is T.LOOKUP:
            self.writer.write(cmds.lookup_failed(rid, error, message))
        elif frame.type is T.PARTITIONED_METADATA:
            self.writer.write(cmds.partitioned_metadata_response(rid, error=error, message=message))
        else:
            self.writer.write(cmds.error(rid, error, message))

    # ------------------------------------------------------------------ tunnel
    async def _tunnel(self, first: Frame) -> None:
        target = first.command.proxy_to_broker_url
        if "://" not in target:  # the official clients send host:port
            target = f"pulsar://{target}"
        if not await self.ctx.discovery.is_known(target):
            self.writer.write(
                cmds.error(-1, ServerError.NotAllowedError, f"the proxy does not forward to {target}")
            )
            return
        base: Any = type(first.base)()
        base.CopyFrom(first.base)
        connect = base.connect
        for name in ("proxy_to_broker_url", "auth_data", "original_principal", "original_auth_data",
                     "original_auth_method"):  # fmt: skip
            connect.ClearField(name)
        for name, value in self._broker_connect_fields().items():
            if value is not None:
                setattr(connect, name, value)
        connect.proxy_version = PROXY_VERSION
        try:
            b_reader, b_writer, connected = await open_broker(
                target,
                frame_from_base(base),
                timeout_s=self.ctx.connect_timeout_s,
                max_frame_size=self.ctx.config.max_message_size,
            )
        except BrokerLinkError as exc:
            self.writer.write(cmds.error(-1, ServerError.ServiceNotReady, str(exc)))
            return
        self.writer.write(frame_from_base(connected.base))
        try:
            await _pipe_both(self.reader, self.writer, b_reader, b_writer, self.ctx.stats)
        finally:
            b_writer.close()


async def _copy(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, stats: dict[str, int], key: str
) -> None:
    while True:
        data = await src.read(COPY_CHUNK)
        if not data:
            return
        stats[key] += len(data)
        dst.write(data)
        await dst.drain()


async def _pipe_both(
    c_reader: asyncio.StreamReader,
    c_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
    stats: dict[str, int],
) -> None:
    """Copy both ways until either side closes (or fails); then both directions stop."""
    up = asyncio.ensure_future(_copy(c_reader, b_writer, stats, "bytes_to_brokers"))
    down = asyncio.ensure_future(_copy(b_reader, c_writer, stats, "bytes_to_clients"))
    try:
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down):
            task.cancel()
        for task in (up, down):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _request_id(frame: Frame) -> int | None:
    cmd = frame.command
    if cmd is not None and hasattr(cmd, "request_id") and cmd.HasField("request_id"):
        return int(cmd.request_id)
    return None
