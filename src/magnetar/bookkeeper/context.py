"""What every ledger operation depends on, in one object (BookKeeper's ClientContext).

Theory of operation: the client builds one :class:`ClientContext` and hands
it to handles, readers and recovery; tests build one around fakes.  Nothing
in it is global: two clients in one process have two contexts.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.bookie.api import BookieClientPool
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.bookkeeper.placement import BookieRegistry, PlacementPolicy
from magnetar.runtime import Clock, Rng, TaskSupervisor


@dataclass(frozen=True)
class ClientContext:
    ledgers: LedgerMetadataStore
    pool: BookieClientPool
    clock: Clock
    rng: Rng
    config: ClientConfig
    supervisor: TaskSupervisor
    registry: BookieRegistry
    placement: PlacementPolicy
