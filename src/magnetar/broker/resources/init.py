"""First-start initialisation, as Pulsar's standalone does it.

Theory of operation: on every start the broker makes sure that its cluster
record exists (and carries the current service URLs), that tenant ``public``
and namespace ``public/default`` exist, and that the system namespace
``pulsar/system`` exists.  Everything is create-if-absent, so a restart, or
two brokers starting at once, changes nothing that an operator edited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from magnetar.broker.errors import AlreadyExistsError
from magnetar.broker.resources.clusters import cluster_data
from magnetar.broker.resources.namespaces import default_policies
from magnetar.broker.resources.tenants import tenant_info

if TYPE_CHECKING:
    from magnetar.broker.resources import BrokerResources

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "public/default"
SYSTEM_TENANT = "pulsar"
SYSTEM_NAMESPACE = "pulsar/system"


async def initialize_cluster(
    resources: BrokerResources,
    cluster: str,
    service_url: str,
    broker_service_url: str,
    num_bundles: int = 4,
    *,
    refresh_urls: bool = True,
) -> None:
    """Create cluster, tenants ``public``/``pulsar`` and namespaces if absent.

    With ``refresh_urls`` the cluster's URLs are refreshed when they changed (a standalone
    restarted on another port must not advertise the old one); a broker of a multi-broker
    cluster passes False, as Pulsar's brokers never rewrite their cluster's registration (it
    names every broker, and the last broker to start must not replace it with itself).
    """
    data = cluster_data(service_url, broker_service_url)
    current = await resources.clusters.get(cluster)
    if current is None:
        try:
            await resources.clusters.create(cluster, data)
        except AlreadyExistsError:
            pass
    elif refresh_urls and any(current.get(k) != v for k, v in data.items()):
        await resources.clusters.put(cluster, {**current, **data})
    for tenant in (DEFAULT_TENANT, SYSTEM_TENANT):
        if not await resources.tenants.exists(tenant):
            try:
                await resources.tenants.create(tenant, tenant_info([cluster]))
            except AlreadyExistsError:
                pass
    for ns in (DEFAULT_NAMESPACE, SYSTEM_NAMESPACE):
        if not await resources.namespaces.exists(ns):
            try:
                await resources.namespaces.create(ns, default_policies([cluster], num_bundles))
            except AlreadyExistsError:
                pass
