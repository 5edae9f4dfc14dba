"""One metadata view over two stores: the local store and the configuration store.

Theory of operation: Pulsar keeps what all clusters of an instance share --
clusters, tenants, namespace policies, partitioned-topic metadata -- in a
*configuration store* (``configurationMetadataStoreUrl``), and everything that
belongs to one cluster (managed ledgers, bookies, bundle ownership, local
policies, schemas, load reports) in the cluster's own metadata store
(``metadataStoreUrl``).  :class:`ConfigurationRoutedStore` is a
:class:`~magnetar.metadata.api.MetadataStore` that sends every path under one
of :data:`CONFIGURATION_PREFIXES` to the configuration store and every other
path to the local one, so the broker's resource views (``/admin/clusters``,
``/admin/policies``, ``/admin/partitioned-topics``) read and write the shared
documents without knowing there are two stores.

* A path belongs to a prefix when it *is* the prefix or lies below it.
* ``children`` of an ancestor of a prefix (``/``, ``/admin``) merges both
  stores' answers, so listings stay complete.
* Listeners are registered on both stores; a notification names its path,
  so a listener sees shared and local changes.
* Session listeners hear the *local* store's session only.  Everything that
  hangs on a session -- bundle-ownership locks, the broker's registration,
  leader election -- is an ephemeral node of the local store, and a lock
  hearing SESSION_LOST gives up its bundle: the configuration store's session
  expiring (its ZooKeeper unreachable for a while) must not unload a
  cluster's bundles, as it does not in Pulsar, where the two stores' session
  events go to different handlers.  Whoever cares about the configuration
  store's session registers with :meth:`add_configuration_session_listener`.
* ``session_id`` is the local store's (ephemeral nodes: bundle ownership,
  broker registration, are local).
* The routed store owns neither store: the composition root that opened them
  closes them (``aclose`` here is a no-op, so closing order stays the root's).
"""

from __future__ import annotations

from magnetar.metadata.api import (
    GetResult,
    MetadataStore,
    NotificationListener,
    SessionListener,
    Stat,
)

# What Pulsar's configuration store holds (its PulsarResources "configuration" side).
CONFIGURATION_PREFIXES: tuple[str, ...] = (
    "/admin/clusters",
    "/admin/policies",
    "/admin/partitioned-topics",
)


class ConfigurationRoutedStore:
    """Local store + configuration store, routed by path (see the module docstring)."""

    def __init__(
        self,
        local: MetadataStore,
        configuration: MetadataStore,
        prefixes: tuple[str, ...] = CONFIGURATION_PREFIXES,
    ) -> None:
        self.local = local
        self.configuration = configuration
        self.prefixes = prefixes

    def is_configuration_path(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.prefixes)

    def _store(self, path: str) -> MetadataStore:
        return self.configuration if self.is_configuration_path(path) else self.local

    def _is_ancestor_of_prefix(self, path: str) -> bool:
        base = path.rstrip("/") + "/"
        return any(p.startswith(base) for p in self.prefixes)

    async def get(self, path: str) -> GetResult | None:
        return await self._store(path).get(path)

    async def exists(self, path: str) -> Stat | None:
        return await self._store(path).exists(path)

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> Stat:
        return await self._store(path).put(
            path, value, expected_version, ephemeral=ephemeral, sequential=sequential
        )

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        await self._store(path).delete(path, expected_version)

    async def delete_recursive(self, path: str) -> None:
        await self._store(path).delete_recursive(path)
        if self._is_ancestor_of_prefix(path):
            await self.configuration.delete_recursive(path)

    async def children(self, path: str) -> list[str]:
        names = await self._store(path).children(path)
        if self._is_ancestor_of_prefix(path):
            names = sorted(set(names) | set(await self.configuration.children(path)))
        return names

    def add_listener(self, listener: NotificationListener) -> None:
        self.local.add_listener(listener)
        self.configuration.add_listener(listener)

    def remove_listener(self, listener: NotificationListener) -> None:
        self.local.remove_listener(listener)
        self.configuration.remove_listener(listener)

    def add_session_listener(self, listener: SessionListener) -> None:
        """The local store's session events (see the module docstring)."""
        self.local.add_session_listener(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        self.local.remove_session_listener(listener)

    def add_configuration_session_listener(self, listener: SessionListener) -> None:
        """The configuration store's session events."""
        self.configuration.add_session_listener(listener)

    def remove_configuration_session_listener(self, listener: SessionListener) -> None:
        self.configuration.remove_session_listener(listener)

    @property
    def session_id(self) -> str:
        return self.local.session_id

    async def aclose(self) -> None:
        """The stores belong to whoever opened them (see the module docstring)."""
