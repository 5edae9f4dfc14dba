"""Frames on a socket, and the proxy's own connection to a broker.

Theory of operation: the proxy reads whole frames (``total_size`` prefix,
bounded by the proxy's frame limit, decoded by ``protocol.frames``) only
while it must understand them: the client's CONNECT, the requests of a
lookup connection, the broker's answer to the proxy's CONNECT.  After a
tunnel's handshake it copies bytes and never decodes again.

:class:`BrokerLink` is one proxy->broker connection for lookups.  It sends
CONNECT (the proxy's credentials, the client's role as
``original_principal``), waits for CONNECTED within the connect timeout, then
serves :meth:`request`: the request's ``request_id`` is replaced by the
link's own (so ids chosen by different clients, or by the proxy following a
redirect, never collide on a link) and put back into the response.  Its
reader task is owned by the link (``aclose`` cancels and awaits it);
requests still waiting when the broker goes away fail with
:class:`BrokerLinkError`.  PING from the broker is answered with PONG.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from magnetar.protocol import client_commands, server_commands
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.errors import RemoteProtocolError
from magnetar.protocol.frames import Frame, command_field_name, decode_frame_body, frame_from_base

MAX_PENDING_PER_LINK = 10_000


class BrokerLinkError(Exception):
    """The broker could not be reached, refused the proxy's CONNECT, or went away."""


async def read_frame(reader: asyncio.StreamReader, max_frame_size: int) -> Frame:
    head = await reader.readexactly(4)
    size = int.from_bytes(head, "big")
    if size > max_frame_size:
        raise RemoteProtocolError(f"frame of {size} bytes exceeds the limit of {max_frame_size}")
    return decode_frame_body(await reader.readexactly(size))


def with_request_id(frame: Frame, request_id: int) -> bytes:
    """The frame re-encoded with another request_id (commands without payload only)."""
    base: Any = type(frame.base)()
    base.CopyFrom(frame.base)
    getattr(base, command_field_name(frame.type)).request_id = request_id
    return frame_from_base(base)


def split_url(url: str) -> tuple[str, int]:
    scheme, _, rest = url.partition("://")
    if scheme != "pulsar":
        raise BrokerLinkError(f"cannot reach {url!r}: only pulsar:// broker URLs are supported")
    host, _, port = rest.rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise BrokerLinkError(f"broker URL {url!r} has no host:port")
    return host.strip("[]"), int(port)


async def open_broker(
    url: str, connect_frame: bytes, *, timeout_s: float, max_frame_size: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Frame]:
    """TCP to the broker, CONNECT, and its CONNECTED frame; BrokerLinkError otherwise."""
    host, port = split_url(url)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        raise BrokerLinkError(f"cannot connect to broker {url}: {exc or 'timeout'}") from None
    try:
        writer.write(connect_frame)
        frame = await asyncio.wait_for(read_frame(reader, max_frame_size), timeout_s)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, RemoteProtocolError) as exc:
        writer.close()
        raise BrokerLinkError(f"broker {url} did not answer CONNECT: {exc or 'timeout'}") from None
    if frame.type is T.ERROR:
        writer.close()
        raise BrokerLinkError(f"broker {url} refused the proxy: {frame.command.message}")
    if frame.type is not T.CONNECTED:
        writer.close()
        raise BrokerLinkError(f"broker {url} answered CONNECT with {frame.type.name}")
    return reader, writer, frame


class BrokerLink:
    def __init__(self, url: str, *, timeout_s: float, max_frame_size: int) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.max_frame_size = max_frame_size
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Frame]] = {}
        self._next_id = 0
        self.closed = False

    async def open(self, **connect_fields: Any) -> None:
        connect = client_commands.connect(**connect_fields)
        reader, self._writer, _ = await open_broker(
            self.url, connect, timeout_s=self.timeout_s, max_frame_size=self.max_frame_size
        )
        self._reader_task = asyncio.get_running_loop().create_task(
            self._read_loop(reader), name=f"proxy-link:{self.url}"
        )

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        error: BaseException = BrokerLinkError(f"broker {self.url} closed the connection")
        try:
            while True:
                frame = await read_frame(reader, self.max_frame_size)
                if frame.type is T.PING:
                    self._write(server_commands.pong())
                    continue
                cmd = frame.command
                if cmd is not None and hasattr(cmd, "request_id") and cmd.HasField("request_id"):
                    fut = self._pending.pop(cmd.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
        except (OSError, asyncio.IncompleteReadError, RemoteProtocolError) as exc:
            error = BrokerLinkError(f"connection to broker {self.url} lost: {exc}")
        finally:
            self.closed = True
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(error)
            self._pending.clear()

    def _write(self, data: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(data)

    async def request(self, frame: Frame | None = None, *, lookup: tuple[str, bool] | None = None) -> Frame:
        """Send ``frame`` (or a LOOKUP of ``lookup=(topic, authoritative)``) under the link's own
        request id; the response frame, still carrying the link's id."""
        if self.closed or self._writer is None:
            raise BrokerLinkError(f"connection to broker {self.url} is closed")
        if len(self._pending) >= MAX_PENDING_PER_LINK:
            raise BrokerLinkError(f"too many requests pending on broker {self.url}")
        rid = self._next_id
        self._next_id += 1
        data = client_commands.lookup(lookup[0], rid, lookup[1]) if lookup else with_request_id(frame, rid)  # type: ignore[arg-type]
        fut: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._write(data)
        try:
            return await asyncio.wait_for(fut, self.timeout_s)
        except TimeoutError:
            raise BrokerLinkError(f"broker {self.url} did not answer within {self.timeout_s:.0f} s") from None
        finally:
            self._pending.pop(rid, None)

    async def aclose(self) -> None:
        self.closed = True
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
