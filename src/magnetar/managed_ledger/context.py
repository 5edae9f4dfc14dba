"""What a managed ledger depends on, bundled (BookKeeper's ClientContext in spirit), and its bounds.

The factory builds one :class:`MLContext` and hands it to every managed ledger
and cursor it opens, so tests swap in a memory store, the in-memory
BookKeeper, a manual clock or an offloader without touching the code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from magnetar.bookkeeper.api import BKError, BookKeeper
from magnetar.managed_ledger.api import ManagedLedgerError, ManagedLedgerStorageError
from magnetar.managed_ledger.cache import EntryCache
from magnetar.managed_ledger.offload import Offloader
from magnetar.managed_ledger.offload_blob import OffloaderRegistry
from magnetar.metadata.api import MetadataStore
from magnetar.runtime import Clock, TaskSupervisor

# Bounds of the managed ledger (DESIGN: every queue and wait has one).
MAX_QUEUED_ADDS = 100_000
# Adds in flight on the ledger client per managed ledger; below bookkeeper's pending_adds_max
# (10,000 by default) so the client never parks an add waiting for room.
MAX_INFLIGHT_ADDS = 5_000
LOCK_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 120.0
READ_HANDLES_MAX = 32


@dataclass
class MLContext:
    store: MetadataStore
    bookkeeper: BookKeeper
    clock: Clock
    cache: EntryCache
    supervisor: TaskSupervisor
    offloader: Offloader | None = None
    # Drivers chosen by offload policies (and by offload contexts, for reads).
    offloaders: OffloaderRegistry | None = None
    read_ahead_entries: int = 100


async def quiet(aw: Awaitable[object]) -> None:
    """Await, ignoring storage errors (best-effort cleanup: closing, deleting)."""
    try:
        await aw
    except (BKError, ManagedLedgerError):
        pass


class timed_lock:  # noqa: N801 - used like a function: ``async with timed_lock(lock)``
    """``async with timed_lock(lock)``: acquire with a timeout (every wait has one)."""

    def __init__(self, lock: asyncio.Lock, timeout_s: float = LOCK_TIMEOUT_S) -> None:
        self._lock = lock
        self._timeout_s = timeout_s

    async def __aenter__(self) -> None:
        try:
            await asyncio.wait_for(self._lock.acquire(), self._timeout_s)
        except TimeoutError:
            raise ManagedLedgerStorageError("managed ledger operation lock timed out") from None

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()
