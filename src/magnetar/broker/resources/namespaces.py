"""Namespaces at ``/admin/policies/{tenant}/{ns}`` (Policies JSON).

Theory of operation: a namespace is its Policies document, in Pulsar's field
names (snake_case for the historic ones, camelCase for later additions; see
the admin-REST reference 11.3).  ``default_policies`` is what a fresh
namespace returns.  Bundles are stored inside the policies (``bundles``), split
evenly over the 32-bit hash range as Pulsar does on creation.  ``update``
is a CAS loop so concurrent admin calls do not lose each other's changes.

Reads may go through a read-through :class:`~magnetar.metadata.cache.MetadataCache`
(the broker's resources do; one-shot tools do not): every lookup and every
topic load asks for its namespace's policies several times (bundles, auto
creation, dedup, schema, replication), and a metadata-store round trip each
time made loading 10,000 topics mostly ZooKeeper traffic.  The cache holds the
stored bytes (absent namespaces too) and each ``get`` decodes a fresh dict, so
a caller may change what it got.  The store's watch drops an entry when any
broker changes the namespace; this broker's own writes drop it at once, so it
reads its own writes.  Bundle boundaries on the way to an ownership decision
(lookup, topic load) are read ``fresh``: the cache may lag a split elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from magnetar.broker.errors import (
    AlreadyExistsError,
    NamespaceNotFoundError,
    PreconditionFailedError,
    TenantNotFoundError,
)
from magnetar.broker.resources.base import Doc, JsonStore
from magnetar.metadata.api import NotFound
from magnetar.metadata.cache import MetadataCache

ROOT = "/admin/policies"
FULL_RANGE = 0x1_0000_0000


def bundle_boundaries(num_bundles: int) -> list[str]:
    """N+1 hex boundaries from 0x00000000 to 0xffffffff, evenly spaced."""
    n = max(1, num_bundles)
    step = FULL_RANGE // n
    bounds = [i * step for i in range(n)] + [FULL_RANGE - 1]
    return [f"0x{b:08x}" for b in bounds]


def default_policies(replication_clusters: Iterable[str], num_bundles: int = 4) -> Doc:
    return {
        "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
        "replication_clusters": sorted(set(replication_clusters)),
        "allowed_clusters": [],
        "bundles": {"boundaries": bundle_boundaries(num_bundles), "numBundles": max(1, num_bundles)},
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "persistence": None,
        "deduplicationEnabled": None,
        "autoTopicCreationOverride": None,
        "autoSubscriptionCreationOverride": None,
        "latency_stats_sample_rate": {},
        "message_ttl_in_seconds": None,
        "subscription_expiration_time_minutes": None,
        "retention_policies": None,
        "deleted": False,
        "encryption_required": False,
        "delayed_delivery_policies": None,
        "inactive_topic_policies": None,
        "subscription_auth_mode": "None",
        "max_producers_per_topic": None,
        "max_consumers_per_topic": None,
        "max_consumers_per_subscription": None,
        "max_unacked_messages_per_consumer": None,
        "max_unacked_messages_per_subscription": None,
        "max_subscriptions_per_topic": None,
        "compaction_threshold": None,
        "offload_threshold": -1,
        "offload_threshold_in_seconds": -1,
        "offload_deletion_lag_ms": None,
        "max_topics_per_namespace": None,
        "schema_auto_update_compatibility_strategy": None,
        "schema_compatibility_strategy": "UNDEFINED",
        "is_allow_auto_update_schema": None,
        "schema_validation_enforced": False,
        "offload_policies": None,
        "deduplicationSnapshotIntervalSeconds": None,
        "subscription_types_enabled": [],
        "allowed_topic_properties_for_metrics": [],
        "properties": {},
        "resource_group_name": None,
        "migrated": False,
        "dispatcherPauseOnAckStatePersistentEnabled": None,
        "entryFilters": None,
    }


def split_namespace(namespace: str) -> tuple[str, str]:
    tenant, sep, ns = namespace.partition("/")
    if not sep or not tenant or not ns or "/" in ns:
        raise NamespaceNotFoundError(f"Invalid namespace name: {namespace}")
    return tenant, ns


class NamespaceResources:
    def __init__(self, js: JsonStore, cache: MetadataCache[bytes] | None = None) -> None:
        self._js = js
        self._cache = cache

    @staticmethod
    def path(namespace: str) -> str:
        tenant, ns = split_namespace(namespace)
        return f"{ROOT}/{tenant}/{ns}"

    async def list(self, tenant: str) -> list[str]:
        """Namespaces of a tenant as ``tenant/ns`` names."""
        if not await self._js.exists(f"{ROOT}/{tenant}"):
            raise TenantNotFoundError("Tenant does not exist")
        return [f"{tenant}/{ns}" for ns in await self._js.children(f"{ROOT}/{tenant}")]

    async def get(self, namespace: str, *, fresh: bool = False) -> Doc | None:
        """``fresh``: from the store, not the cache (a bundle's boundaries before ownership is
        decided: a split writes them, then releases the parent bundle; a lookup that computed
        the parent from a stale copy could take the released range while another broker
        takes a child)."""
        path = self.path(namespace)
        if self._cache is None or fresh:
            return await self._js.get(path)
        raw = await self._cache.get(path)
        if raw is None:
            return None
        return json.loads(raw) if raw else {}

    async def exists(self, namespace: str) -> bool:
        try:
            path = self.path(namespace)
        except NamespaceNotFoundError:
            return False
        if self._cache is None:
            return await self._js.exists(path)
        return await self._cache.exists(path)

    def _written(self, namespace: str) -> None:
        """This broker wrote the namespace: its next read goes to the store."""
        if self._cache is not None:
            self._cache.invalidate(self.path(namespace))

    async def require(self, namespace: str) -> Doc:
        doc = await self.get(namespace)
        if doc is None:
            raise NamespaceNotFoundError("Namespace does not exist")
        return doc

    async def create(self, namespace: str, policies: Doc) -> None:
        tenant, _ = split_namespace(namespace)
        if not await self._js.exists(f"{ROOT}/{tenant}"):
            raise TenantNotFoundError("Tenant does not exist")
        try:
            if not await self._js.create(self.path(namespace), policies):
                raise AlreadyExistsError("Namespace already exists")
        finally:
            self._written(namespace)

    async def update(self, namespace: str, fn: Callable[[Doc], Doc]) -> Doc:
        try:
            return await self._js.update(self.path(namespace), fn)
        except NotFound:
            raise NamespaceNotFoundError("Namespace does not exist") from None
        finally:
            self._written(namespace)

    async def delete(self, namespace: str) -> None:
        if not await self.exists(namespace):
            raise NamespaceNotFoundError("Namespace does not exist")
        if await self._js.children(self.path(namespace)):
            raise PreconditionFailedError("Cannot delete non empty namespace")
        try:
            await self._js.delete(self.path(namespace))
        finally:
            self._written(namespace)

    async def aclose(self) -> None:
        if self._cache is not None:
            await self._cache.aclose()
