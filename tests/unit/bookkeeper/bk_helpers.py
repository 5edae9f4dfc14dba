"""A ledger client over fake bookies and an in-memory metadata store, on virtual time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Rng
from magnetar.testing.clock import VirtualClock
from magnetar.testing.fake_bookie import FakeBookiePool

FAST = ClientConfig(
    add_timeout_ms=1_000,
    read_timeout_ms=1_000,
    speculative_read_timeout_ms=200,
    ensemble_change_backoff_ms=50,
    ensemble_change_attempts_max=3,
)


@dataclass
class Env:
    server: MemoryMetadataServer
    pool: FakeBookiePool
    clock: VirtualClock
    bk: BookKeeperClient
    config: ClientConfig

    def client(self, seed: int = 2) -> BookKeeperClient:
        return BookKeeperClient(self.server.session(), self.pool, self.clock, Rng(seed), self.config)

    def holders(self, ledger_id: int, entry_id: int) -> list[str]:
        return sorted(b for b, bookie in self.pool.bookies.items() if bookie.has_entry(ledger_id, entry_id))


async def make_env(
    bookies: int = 5,
    config: ClientConfig = FAST,
    racks: Mapping[str, str] | None = None,
    seed: int = 1,
) -> Env:
    clock = VirtualClock()
    server = MemoryMetadataServer(clock=clock)
    pool = FakeBookiePool.of(bookies, clock)
    registrar = server.session()
    await pool.register(registrar, racks=racks)
    bk = BookKeeperClient(server.session(), pool, clock, Rng(seed), config)
    return Env(server, pool, clock, bk, config)
