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
