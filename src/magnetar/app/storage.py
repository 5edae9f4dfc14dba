"""The storage stack under a standalone broker: metadata, bookie, ledger client, managed ledgers.

Theory of operation: Pulsar's standalone runs its storage in the broker's
process, and so do we -- with the same components a cluster uses, wired
without sockets:

    RocksDB metadata store   <data-dir>/metadata   (rocksdb: URL, one owner process)
    one bookie               <data-dir>/bookie     (journal + ledger storage)
      reached through an in-process BookieClient (same interface as the wire client)
    BookKeeperClient         E = Qw = Qa = 1 over that one bookie
    ManagedLedgerFactory     topics' logs and cursors

:func:`open_standalone_storage` opens them bottom-up and returns a
:class:`StorageStack` whose ``aclose`` closes them top-down (managed ledgers
flush their cursors before the ledger client goes, the bookie syncs its
journal before the metadata store goes).  If opening fails half-way, what was
already open is closed before the error propagates, so a failed start leaves
no RocksDB lock behind.

Other stacks (an in-memory one for fast tests, a cluster one with bookies over
the wire for ``magnetar broker``) are built elsewhere and handed to
:class:`~magnetar.app.standalone.Standalone` as a ``StorageStack`` too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from magnetar.app.config import StandaloneConfig, get_bool, get_int
from magnetar.metadata.api import MetadataStore
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import Clock, Rng

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[Any]]

STANDALONE_BOOKIE_ID = "127.0.0.1:3181"


class StorageStartError(Exception):
    """The storage stack could not be opened (locked data dir, corrupt files, missing piece)."""


@dataclass
class StorageStack:
    metadata_store: MetadataStore
    ml_factory: Any  # magnetar.managed_ledger.api.ManagedLedgerFactory
    # Closed in reverse order of appending (the last opened first).
    closers: list[tuple[str, Closer]] = field(default_factory=list)
    # Components kept for statistics / tests (bookie, bookkeeper client, ...).
    parts: dict[str, Any] = field(default_factory=dict)

    async def aclose(self) -> None:
        while self.closers:
            name, close = self.closers.pop()
            try:
                await close()
            except Exception:  # keep closing the rest: a failed close must not leak the others
                log.exception("closing %s failed", name)


async def open_standalone_storage(config: StandaloneConfig, *, clock: Clock, rng: Rng) -> StorageStack:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    store = await create_metadata_store(f"rocksdb:{config.metadata_dir}", clock=clock)
    stack = StorageStack(metadata_store=store, ml_factory=None, closers=[("metadata store", store.aclose)])
    try:
        await _open_ledger_layers(stack, config, clock=clock, rng=rng)
    except BaseException:
        await stack.aclose()
        raise
    return stack


async def _open_ledger_layers(
    stack: StorageStack, config: StandaloneConfig, *, clock: Clock, rng: Rng
) -> None:
    from magnetar.bookie.api import AVAILABLE_PATH
    from magnetar.bookie.config import BookieConfig
    from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
    from magnetar.bookie.storage import LedgerStorage
    from magnetar.bookkeeper.client import BookKeeperClient

    props = config.properties
    config.bookie_dir.mkdir(parents=True, exist_ok=True)
    bookie_config = BookieConfig.for_data_dir(
        str(config.bookie_dir),
        journal_sync_data=get_bool(props, "journalSyncData", False),
        advertised_address="127.0.0.1",
        bookie_id=STANDALONE_BOOKIE_ID,
    )
    storage = LedgerStorage(bookie_config, clock=clock)
    stack.closers.append(("bookie storage", storage.aclose))
    await storage.open()
    stack.parts["bookie"] = storage
    pool = LocalBookieClientPool(LocalBookieClient(storage))
    stack.closers.append(("bookie client pool", pool.aclose))
    # Register the bookie as writable (ephemeral: gone with the session, re-created on restart),
    # which is how the ledger client's placement finds it.
    await stack.metadata_store.put(f"{AVAILABLE_PATH}/{storage.bookie_id}", b"", ephemeral=True)

    bk = BookKeeperClient(stack.metadata_store, pool, clock, rng.fork("bookkeeper"))
    stack.closers.append(("bookkeeper client", bk.aclose))
    stack.parts["bookkeeper"] = bk

    stack.ml_factory = await _open_ml_factory(stack, bk, config, clock=clock)
    stack.closers.append(("managed ledger factory", stack.ml_factory.aclose))


async def _open_ml_factory(stack: StorageStack, bk: Any, config: StandaloneConfig, *, clock: Clock) -> Any:
    from magnetar.broker.config import config_from_properties
    from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
    from magnetar.managed_ledger.offload import OffloadError
    from magnetar.managed_ledger.offload_blob import OffloaderRegistry

    props = config.properties
    ml_config = config_from_properties(props).managed_ledger_config()
    try:  # a tiered-storage misconfiguration is a start error, not a surprise at the first offload
        ml_config.offload_policies.check()
    except OffloadError as e:
        raise StorageStartError(f"tiered storage: {e}") from e
    return ManagedLedgerFactoryImpl(
        stack.metadata_store,
        bk,
        clock,
        ml_config,
        cache_bytes_max=get_int(props, "managedLedgerCacheSizeMB", 64) * 1024 * 1024,
        offloaders=OffloaderRegistry(ml_config.offload_policies),
        # Pulsar's retention check: rollover by time, trimming, offload and its deletion lag.
        check_interval_s=get_int(props, "retentionCheckIntervalInSeconds", 60),
    )


async def open_cluster_storage(
    metadata_url: str, config: StandaloneConfig, *, clock: Clock, rng: Rng
) -> StorageStack:
    """A broker's storage in a cluster: a shared metadata store and bookies over TCP.

    The bookies register themselves under ``/ledgers/available`` in the same
    store (``magnetar bookie``); placement finds them there.
    """
    from magnetar.bookie.wire_client import WireBookieClientPool
    from magnetar.bookkeeper.client import BookKeeperClient

    store = await create_metadata_store(metadata_url, clock=clock)
    stack = StorageStack(metadata_store=store, ml_factory=None, closers=[("metadata store", store.aclose)])
    try:
        pool = WireBookieClientPool()
        stack.closers.append(("bookie client pool", pool.aclose))
        bk = BookKeeperClient(store, pool, clock, rng.fork("bookkeeper"))
        stack.closers.append(("bookkeeper client", bk.aclose))
        stack.parts["bookkeeper"] = bk
        stack.ml_factory = await _open_ml_factory(stack, bk, config, clock=clock)
        stack.closers.append(("managed ledger factory", stack.ml_factory.aclose))
    except BaseException:
        await stack.aclose()
        raise
    return stack
