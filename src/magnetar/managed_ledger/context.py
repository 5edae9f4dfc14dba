"""What a managed ledger depends on, bundled (BookKeeper's ClientContext in spirit).

The factory builds one :class:`MLContext` and hands it to every managed ledger
and cursor it opens, so tests swap in a memory store, the in-memory
BookKeeper, a manual clock or an offloader without touching the code.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.bookkeeper.api import BookKeeper
from magnetar.managed_ledger.cache import EntryCache
from magnetar.managed_ledger.offload import Offloader
from magnetar.metadata.api import MetadataStore
from magnetar.runtime import Clock, TaskSupervisor

# Bounds of the managed ledger (DESIGN: every queue and wait has one).
MAX_QUEUED_ADDS = 100_000
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
    read_ahead_entries: int = 100
