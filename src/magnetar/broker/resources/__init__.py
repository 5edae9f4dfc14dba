"""Typed views of the broker's metadata paths, and first-start initialisation.

Theory of operation: :class:`BrokerResources` bundles one view per family
(clusters, tenants, namespaces, partitioned topics), all over one
MetadataStore.  Each view speaks Pulsar's JSON shapes at Pulsar's paths and
raises ``broker.errors`` types (404/409/412 ...), so the admin REST and the
binary-protocol handlers share them unchanged.
"""

from __future__ import annotations

from magnetar.broker.resources.base import JsonStore
from magnetar.broker.resources.clusters import ClusterResources, cluster_data
from magnetar.broker.resources.namespaces import NamespaceResources, default_policies, split_namespace
from magnetar.broker.resources.partitioned import PartitionedTopicResources
from magnetar.broker.resources.tenants import TenantResources, tenant_info
from magnetar.metadata.api import MetadataStore
from magnetar.metadata.cache import BytesSerde, MetadataCache
from magnetar.runtime import TaskSupervisor


class BrokerResources:
    """``cached``: namespace policies read through a watched cache (a broker's resources;
    one-shot tools read the store).  ``aclose`` releases the cache."""

    def __init__(
        self, store: MetadataStore, *, cached: bool = False, supervisor: TaskSupervisor | None = None
    ) -> None:
        self.store = store
        js = JsonStore(store)
        self.clusters = ClusterResources(js)
        self.tenants = TenantResources(js)
        ns_cache = MetadataCache(store, BytesSerde(), supervisor=supervisor) if cached else None
        self.namespaces = NamespaceResources(js, ns_cache)
        self.partitioned_topics = PartitionedTopicResources(js)

    async def aclose(self) -> None:
        await self.namespaces.aclose()


from magnetar.broker.resources.init import initialize_cluster  # noqa: E402

__all__ = [
    "BrokerResources",
    "ClusterResources",
    "NamespaceResources",
    "PartitionedTopicResources",
    "TenantResources",
    "cluster_data",
    "default_policies",
    "initialize_cluster",
    "split_namespace",
    "tenant_info",
]
