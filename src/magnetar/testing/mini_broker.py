"""A minimal broker on the protocol codec, for tests that drive the official client.

Theory of operation: :class:`MiniBroker` listens on 127.0.0.1 (port 0), runs one
:class:`~magnetar.protocol.connection.ServerConnection` per socket and answers what every
client session needs -- CONNECT, PING, PARTITIONED_METADATA (0 partitions), LOOKUP (connect
here), CLOSE_PRODUCER/CLOSE_CONSUMER -- and hands every other command to :meth:`handle`,
which subclasses override to put the layer under test (a schema registry, a compacted view,
...) behind the real client's bytes.  Exceptions raised while serving are recorded in
``errors`` for the test to assert on, never swallowed silently.
"""

from __future__ import annotations

import asyncio
import contextlib

from magnetar.protocol import commands
from magnetar.protocol.connection import (
    CommandReceived,
    ConnectionClosed,
    ConnectRequested,
    PingReceived,
    ServerConnection,
)
from magnetar.protocol.enums import CommandType, LookupType
from magnetar.protocol.frames import Frame, frame_limit_for

MAX_MESSAGE_SIZE = 5 * 1024 * 1024


class MiniBroker:
    def __init__(self) -> None:
        self.port = 0
        self.errors: list[BaseException] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    async def handle(self, conn: ServerConnection, frame: Frame) -> bytes | None:
        """Answer a command the base class does not; None = no answer."""
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection(
            max_frame_size=frame_limit_for(MAX_MESSAGE_SIZE), max_message_size=MAX_MESSAGE_SIZE
        )
        try:
            while data := await reader.read(256 * 1024):
                conn.receive_data(data)
                while (event := conn.next_event()) is not None:
                    if isinstance(event, ConnectionClosed):
                        return
                    out = await self._answer(conn, event)
                    if out:
                        writer.write(out)
                await writer.drain()
        except Exception as exc:  # recorded for the test to assert on
            self.errors.append(exc)
        finally:
            writer.close()

    async def _answer(self, conn: ServerConnection, event: object) -> bytes | None:
        if isinstance(event, ConnectRequested):
            return conn.accept_connect()
        if isinstance(event, PingReceived):
            return event.reply
        if not isinstance(event, CommandReceived):
            return None
        cmd, t = event.frame.command, event.frame.type
        if t is CommandType.PARTITIONED_METADATA:
            return conn.send(commands.partitioned_metadata_response(cmd.request_id, 0))
        if t is CommandType.LOOKUP:
            return conn.send(
                commands.lookup_response(cmd.request_id, LookupType.Connect, self.url, authoritative=True)
            )
        answer = await self.handle(conn, event.frame)
        if answer is None and t in (CommandType.CLOSE_PRODUCER, CommandType.CLOSE_CONSUMER):
            return conn.send(commands.success(cmd.request_id))
        return answer
