"""An in-process broker over the memory metadata store, the in-memory BookKeeper and the
real managed ledger, listening on 127.0.0.1:<random port>."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service import BrokerService
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.memory_bookkeeper import MemoryBookKeeper


class BrokerHarness:
    def __init__(self, config: BrokerConfig) -> None:
        self.clock = RealClock()
        self.server = MemoryMetadataServer(clock=self.clock)
        self.store = self.server.session()
        self.bk = MemoryBookKeeper(self.clock)
        self.config = config
        self.factory = ManagedLedgerFactoryImpl(
            self.store, self.bk, self.clock, config.managed_ledger_config()
        )
        self.service = BrokerService(config, self.store, self.factory, self.clock, Rng(7))

    async def start(self) -> None:
        await self.service.serve("127.0.0.1", 0)
        self.service.set_web_service_port(8080)
        await self.service.start()

    @property
    def port(self) -> int:
        return self.service.broker_port

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    async def restart_service(self) -> None:
        """A new BrokerService on the same storage (topics reload from the managed ledgers)."""
        await self.service.aclose()
        await self.factory.aclose()
        self.factory = ManagedLedgerFactoryImpl(
            self.store, self.bk, self.clock, self.config.managed_ledger_config()
        )
        self.service = BrokerService(self.config, self.store, self.factory, self.clock, Rng(8))
        await self.start()

    async def aclose(self) -> None:
        await self.service.aclose()
        with contextlib.suppress(Exception):
            await self.factory.aclose()
        with contextlib.suppress(Exception):
            await self.store.aclose()


def base_config(**overrides: object) -> BrokerConfig:
    cfg = BrokerConfig(advertised_address="127.0.0.1", broker_service_port=0, web_service_port=0)
    return cfg.with_overrides(dict(overrides)) if overrides else cfg


@contextlib.asynccontextmanager
async def running_broker(**overrides: object) -> AsyncIterator[BrokerHarness]:
    h = BrokerHarness(base_config(**overrides))
    await h.start()
    try:
        yield h
    finally:
        await asyncio.wait_for(h.aclose(), 30)


@pytest.fixture
async def broker() -> AsyncIterator[BrokerHarness]:
    async with running_broker() as h:
        yield h


# ---------------------------------------------------------------------- a raw protocol client
from magnetar.protocol import commands  # noqa: E402
from magnetar.protocol.enums import CommandType  # noqa: E402
from magnetar.protocol.frames import Frame, FrameDecoder  # noqa: E402
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata  # noqa: E402


class RawClient:
    """Frames in, frames out over a real TCP socket; every frame the broker sends is queued."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = FrameDecoder(64 * 1024 * 1024)
        self.frames: asyncio.Queue[Frame] = asyncio.Queue()
        self.eof = asyncio.Event()
        self.answer_pings = True
        self._task = asyncio.get_running_loop().create_task(self._pump())
        self._rid = 100
        self.stash: list[Frame] = []

    @classmethod
    async def connect(cls, port: int, handshake: bool = True) -> RawClient:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        c = cls(r, w)
        if handshake:
            c.send(commands.connect())
            f = await c.expect(CommandType.CONNECTED)
            c.connected = f.command
        return c

    def rid(self) -> int:
        self._rid += 1
        return self._rid

    async def _pump(self) -> None:
        try:
            await self._pump_frames()
        finally:
            self.eof.set()  # EOF, or a reset by the broker

    async def _pump_frames(self) -> None:
        while True:
            data = await self.reader.read(65536)
            if not data:
                return
            self.decoder.feed(data)
            while (f := self.decoder.next_frame()) is not None:
                if f.type == CommandType.PING and self.answer_pings:
                    self.send(commands.pong())
                    continue
                self.frames.put_nowait(f)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def next(self, timeout_s: float = 5.0) -> Frame:
        if self.stash:
            return self.stash.pop(0)
        return await asyncio.wait_for(self.frames.get(), timeout_s)

    async def response(self, type_: int, request_id: int, timeout_s: float = 5.0) -> Frame:
        """Wait for the answer to one request; other frames are kept for ``next``."""
        kept: list[Frame] = []
        try:
            while True:
                f = await asyncio.wait_for(self.frames.get(), timeout_s)
                if getattr(f.command, "request_id", None) == request_id and f.type in (
                    type_,
                    CommandType.ERROR,
                ):
                    assert f.type == type_, f"request {request_id} failed: {f.command}"
                    return f
                kept.append(f)
        finally:
            self.stash.extend(kept)

    async def expect(self, type_: int, timeout_s: float = 5.0) -> Frame:
        f = await self.next(timeout_s)
        assert f.type == type_, f"expected {CommandType(type_).name}, got {f.type.name}: {f.command}"
        return f

    async def nothing(self, within: float = 0.3) -> None:
        assert not self.stash, self.stash
        try:
            f = await asyncio.wait_for(self.frames.get(), within)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected {f.type.name}: {f.command}")

    # -------------------------------------------------- conveniences
    async def create_producer(self, topic: str, producer_id: int = 1, **kw: object) -> str:
        rid = self.rid()
        self.send(commands.producer(topic, producer_id, rid, **kw))
        f = await self.response(CommandType.PRODUCER_SUCCESS, rid)
        return f.command.producer_name

    def send_message(
        self,
        producer_id: int,
        seq: int,
        payload: bytes,
        *,
        producer_name: str = "p",
        batch: int | None = None,
    ) -> None:
        meta = new_message_metadata(
            producer_name=producer_name, sequence_id=seq, publish_time=1_700_000_000_000 + seq
        )
        if batch is not None:
            meta.num_messages_in_batch = batch
        self.send(
            commands.send(producer_id, seq, build_headers_and_payload(meta, payload), num_messages=batch)
        )

    async def subscribe(self, topic: str, sub: str, sub_type: int, consumer_id: int, **kw: object) -> None:
        rid = self.rid()
        self.send(commands.subscribe(topic, sub, sub_type, consumer_id, rid, **kw))
        await self.response(CommandType.SUCCESS, rid)

    async def aclose(self) -> None:
        self.writer.close()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


@pytest.fixture
async def raw(broker):
    clients: list[RawClient] = []

    async def make(handshake: bool = True) -> RawClient:
        c = await RawClient.connect(broker.port, handshake)
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.aclose()
