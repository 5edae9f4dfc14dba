"""The storage stack under a standalone broker: metadata, bookie, ledger client, managed ledgers.

Theory of operation: Pulsar's standalone runs its storage in the broker's
process, and so do we -- with the same components a cluster uses, wired
without sockets:

    RocksDB metadata store   <data-dir>/metadata   (rocksdb: URL, one owner process)
    one bookie               <data-dir>/bookie     (journal + ledger storage, cookie,
                                                    GC + compaction, disk checks; all of
                                                    ``magnetar bookie`` but the TCP server)
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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar.app.config import StandaloneConfig, get_int
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


async def open_standalone_storage(
    config: StandaloneConfig, *, clock: Clock, rng: Rng, disk: Any = None
) -> StorageStack:
    """``disk``: the bookie's :class:`~magnetar.bookie.disk.Disk` (tests pass one whose reported
    usage they control); the real file system when None."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    store = await create_metadata_store(f"rocksdb:{config.metadata_dir}", clock=clock)
    stack = StorageStack(metadata_store=store, ml_factory=None, closers=[("metadata store", store.aclose)])
    try:
        await _open_ledger_layers(stack, config, clock=clock, rng=rng, disk=disk)
    except BaseException:
        await stack.aclose()
        raise
    return stack


async def _open_ledger_layers(
    stack: StorageStack, config: StandaloneConfig, *, clock: Clock, rng: Rng, disk: Any
) -> None:
    from magnetar.bookie.app import Bookie
    from magnetar.bookie.local_client import LocalBookieClientPool
    from magnetar.bookkeeper.client import BookKeeperClient
    from magnetar.bookkeeper.config import ClientConfig

    config.bookie_dir.mkdir(parents=True, exist_ok=True)
    # The whole bookie, as `magnetar bookie` runs it (cookie, registration, disk checks, GC and
    # compaction), minus its TCP server: the broker reaches it through the in-process client.
    bookie = Bookie(
        standalone_bookie_config(config),
        stack.metadata_store,
        disk=disk,
        clock=clock,
        rng=rng.fork("bookie"),
        serve=False,
    )
    stack.closers.append(("bookie", bookie.stop))
    await bookie.start()
    stack.parts["bookie"] = bookie.storage
    stack.parts["bookie_app"] = bookie
    pool = LocalBookieClientPool(bookie.local_client())
    stack.closers.append(("bookie client pool", pool.aclose))

    client_config = ClientConfig.from_properties(config.properties)
    bk = BookKeeperClient(stack.metadata_store, pool, clock, rng.fork("bookkeeper"), client_config)
    stack.closers.append(("bookkeeper client", bk.aclose))
    stack.parts["bookkeeper"] = bk

    stack.ml_factory = await _open_ml_factory(stack, bk, config, clock=clock)
    stack.closers.append(("managed ledger factory", stack.ml_factory.aclose))


# The embedded bookie's defaults where Pulsar's standalone differs from a bookie's (bk_server.conf):
# no fsync per add (journalSyncData=false), GC every 5 minutes, read-only only at 99% disk use.
# And, our own choice for a single node: 64 MB entry logs and journal files (BookKeeper's are
# 1 GB / 2 GB).  The entry log being written and the journal file being written are never
# reclaimed, so with BookKeeper's sizes up to 3 GB of deleted data could stay on a laptop's
# disk; with these, at most ~128 MB does.
STANDALONE_BOOKIE_DEFAULTS: dict[str, str] = {
    "journalSyncData": "false",
    "gcWaitTime": "300000",
    "diskUsageThreshold": "0.99",
    "logSizeLimit": str(64 * 1024 * 1024),
    "journalMaxSizeMB": "64",
}


def standalone_bookie_config(config: StandaloneConfig) -> Any:
    """The embedded bookie's typed config: the BookKeeper keys of the standalone's own settings
    (``journalSyncData``, ``gcWaitTime``, ``minorCompactionInterval``, ``diskUsageThreshold``...)
    over the standalone defaults; its directories and id are fixed under the data dir."""
    from magnetar.bookie.config import BK_KEYS, EMBEDDED_IDENTITY_KEYS, BookieConfig

    wanted = set(BK_KEYS.values()) - EMBEDDED_IDENTITY_KEYS
    values = {**STANDALONE_BOOKIE_DEFAULTS, **{k: v for k, v in config.properties.items() if k in wanted}}
    base = BookieConfig.for_data_dir(
        str(config.bookie_dir), advertised_address="127.0.0.1", bookie_id=STANDALONE_BOOKIE_ID
    )
    try:
        return BookieConfig.from_mapping(values, base)
    except ValueError as exc:
        raise StorageStartError(str(exc)) from None


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
    from magnetar.bookkeeper.config import ClientConfig

    props = config.properties
    # Pulsar's key, then its deprecated ZooKeeper-era name (-1 = unset); the store's default otherwise.
    timeout_ms = get_int(props, "metadataStoreSessionTimeoutMillis", -1)
    if timeout_ms <= 0:
        timeout_ms = get_int(props, "zooKeeperSessionTimeoutMillis", -1)
    extra = {"session_timeout_ms": timeout_ms} if timeout_ms > 0 else {}
    store = await create_metadata_store(metadata_url, clock=clock, **extra)
    stack = StorageStack(metadata_store=store, ml_factory=None, closers=[("metadata store", store.aclose)])
    try:
        pool = WireBookieClientPool()
        stack.closers.append(("bookie client pool", pool.aclose))
        # A cluster broker places ensembles rack-aware by default, as Pulsar's broker does.
        client_config = ClientConfig.from_properties(
            config.properties, ClientConfig(placement_policy="rack_aware")
        )
        bk = BookKeeperClient(store, pool, clock, rng.fork("bookkeeper"), client_config)
        stack.closers.append(("bookkeeper client", bk.aclose))
        stack.parts["bookkeeper"] = bk
        stack.ml_factory = await _open_ml_factory(stack, bk, config, clock=clock)
        stack.closers.append(("managed ledger factory", stack.ml_factory.aclose))
    except BaseException:
        await stack.aclose()
        raise
    return stack


async def broker_metadata_view(
    stack: StorageStack, properties: Mapping[str, str], *, clock: Clock
) -> MetadataStore:
    """The metadata store the broker sees: the local one, or -- when
    ``configurationMetadataStoreUrl`` names another store -- the local one with the
    configuration paths (clusters, tenants, namespaces, partitioned topics) routed to that
    shared configuration store (:mod:`magnetar.metadata.routing`).  The configuration store is
    opened once per stack and closed with it."""
    from magnetar.metadata.routing import ConfigurationRoutedStore

    url = (properties.get("configurationMetadataStoreUrl") or "").strip()
    if not url or url == (properties.get("metadataStoreUrl") or "").strip():
        return stack.metadata_store
    routed = stack.parts.get("configuration_view")
    if routed is None:
        try:
            configuration = await create_metadata_store(url, clock=clock)
        except ValueError as exc:
            raise StorageStartError(f"configurationMetadataStoreUrl: {exc}") from exc
        stack.closers.append(("configuration metadata store", configuration.aclose))
        routed = ConfigurationRoutedStore(stack.metadata_store, configuration)
        stack.parts["configuration_view"] = routed
    return routed
