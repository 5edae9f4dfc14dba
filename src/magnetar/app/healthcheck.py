"""The broker health check: a message through the whole path and back, as Pulsar's does.

Theory of operation: ``GET /admin/v2/brokers/health`` must say whether the
broker can actually serve, not just whether its HTTP thread answers.  Pulsar
produces a random string to a health-check topic and reads it back with a
reader within a deadline; so do we, as a client of our own binary port, with
the sans-IO client connection of :mod:`magnetar.protocol`:

    CONNECT -> PARTITIONED_METADATA (partition 0 if partitioned)
            -> SUBSCRIBE (non-durable reader at latest) -> FLOW
            -> PRODUCER -> SEND -> SEND_RECEIPT (stored: bookie journal)
            -> MESSAGE carrying the same random payload (dispatched back)

Any error answer, a lost connection or the deadline (``timeout_s``) fails the
check with :class:`HealthCheckError` and a reason.  The reader is
non-durable, so a check leaves no subscription behind; the topic keeps one
small message per check, trimmed like any other.  The composition root hands
:func:`make_health_check` to the web app; the web handler only calls it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.protocol import client_commands as cc
from magnetar.protocol.client_connection import ClientConnection
from magnetar.protocol.enums import CommandType, InitialPosition, SubType
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectRejected,
    Event,
    PingReceived,
    ResponseReceived,
)
from magnetar.protocol.message_id import LATEST
from magnetar.protocol.payload import (
    build_headers_and_payload,
    new_message_metadata,
    parse_headers_and_payload,
)
from magnetar.runtime import Clock, Rng

HEALTH_TIMEOUT_S = 10.0
READ_BYTES = 64 * 1024
CLIENT_VERSION = "magnetar-healthcheck"


class HealthCheckError(Exception):
    pass


class _Session:
    """One short-lived client connection driven step by step."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        credentials: tuple[str, bytes] | None = None,
    ) -> None:
        self.reader, self.writer = reader, writer
        self.conn = ClientConnection()
        self.credentials = credentials  # (auth method, auth data) when the broker authenticates

    async def next_event(self) -> Event:
        while True:
            event = self.conn.next_event()
            if event is None:
                data = await self.reader.read(READ_BYTES)
                self.conn.receive_data(data)
                continue
            if isinstance(event, PingReceived):
                self.writer.write(event.reply)
                continue
            if isinstance(event, ConnectionClosed):
                raise HealthCheckError("the broker closed the connection")
            return event

    async def handshake(self) -> None:
        method, data = self.credentials or ("none", None)
        self.writer.write(
            self.conn.connect(client_version=CLIENT_VERSION, auth_method_name=method, auth_data=data)
        )
        event = await self.next_event()
        if isinstance(event, ConnectRejected):
            raise HealthCheckError(f"CONNECT refused: {event.message}")
        if not isinstance(event, Connected):
            raise HealthCheckError(f"expected CONNECTED, got {type(event).__name__}")

    async def request(self, kind: CommandType, build: Callable[[int], bytes]) -> Any:
        rid = self.conn.new_request_id()
        self.writer.write(self.conn.send_request(kind, rid, build(rid)))
        while True:
            event = await self.next_event()
            if isinstance(event, ResponseReceived) and event.kind is kind and event.request_id == rid:
                if event.is_error:
                    cmd = event.frame.command
                    raise HealthCheckError(f"{kind.name} failed: {getattr(cmd, 'message', '') or cmd}")
                if event.final:
                    return event.frame.command

    async def wait_command(self, kind: CommandType) -> Any:
        while True:
            event = await self.next_event()
            if isinstance(event, CommandReceived) and event.type is kind:
                return event.frame
            if isinstance(event, CommandReceived) and event.type is CommandType.SEND_ERROR:
                raise HealthCheckError(f"SEND failed: {event.frame.command.message}")


async def check_broker_health(
    host: str,
    port: int,
    topic: str,
    *,
    clock: Clock,
    rng: Rng,
    timeout_s: float = HEALTH_TIMEOUT_S,
    credentials: tuple[str, bytes] | None = None,
) -> None:
    """Produce a random payload to ``topic`` and read it back; HealthCheckError if that fails."""
    payload = f"health-{rng.hex(16)}".encode()
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                await _round_trip(_Session(reader, writer, credentials), topic, payload, clock)
            finally:
                writer.close()
    except TimeoutError:
        raise HealthCheckError(f"no round trip through {topic} within {timeout_s:g} s") from None
    except (OSError, ProtocolError) as exc:
        raise HealthCheckError(f"cannot talk to the broker at {host}:{port}: {exc}") from exc


async def _round_trip(session: _Session, topic: str, payload: bytes, clock: Clock) -> None:
    await session.handshake()
    # As a client does: ask for partitions first (auto-creation may make the topic partitioned,
    # and a partitioned topic is served through its partitions).
    meta = await session.request(
        CommandType.PARTITIONED_METADATA, lambda rid: cc.partitioned_metadata(topic, rid)
    )
    if meta.partitions > 0:
        topic = f"{topic}-partition-0"
    consumer_id, producer_id = 1, 1
    await session.request(
        CommandType.SUBSCRIBE,
        lambda rid: cc.subscribe(
            topic,
            f"healthcheck-reader-{payload.decode()[-8:]}",
            SubType.Exclusive,
            consumer_id,
            rid,
            durable=False,
            start_message_id=LATEST,
            initial_position=InitialPosition.Latest,
        ),
    )
    session.writer.write(session.conn.send(cc.flow(consumer_id, 10)))
    ok = await session.request(CommandType.PRODUCER, lambda rid: cc.producer(topic, producer_id, rid))
    meta = new_message_metadata(producer_name=ok.producer_name, sequence_id=0, publish_time=clock.time_ms())
    session.writer.write(session.conn.send(cc.send(producer_id, 0, build_headers_and_payload(meta, payload))))
    await session.wait_command(CommandType.SEND_RECEIPT)
    while True:
        frame = await session.wait_command(CommandType.MESSAGE)
        if parse_headers_and_payload(frame.headers_and_payload).payload == payload:
            return


def make_health_check(
    host: str, port: int, topic: str, *, clock: Clock, rng: Rng, credentials: tuple[str, bytes] | None = None
) -> Callable[[], Awaitable[None]]:
    async def health_check() -> None:
        await check_broker_health(host, port, topic, clock=clock, rng=rng, credentials=credentials)

    return health_check
