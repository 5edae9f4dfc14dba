"""Clusters at ``/admin/clusters/{cluster}`` (ClusterData JSON).

Theory of operation: a cluster record names the service URLs of a cluster
(``serviceUrl``, ``brokerServiceUrl`` ...).  Standalone creates its own on
first start; the admin REST edits them.  Pulsar also lists sub-nodes under a
cluster path (namespace isolation policies, failure domains), so listing
clusters filters nothing but what is a direct child of ``/admin/clusters``.
"""

from __future__ import annotations

from magnetar.broker.errors import AlreadyExistsError, ClusterNotFoundError
from magnetar.broker.resources.base import Doc, JsonStore

ROOT = "/admin/clusters"


def cluster_data(
    service_url: str,
    broker_service_url: str,
    service_url_tls: str | None = None,
    broker_service_url_tls: str | None = None,
) -> Doc:
    doc: Doc = {"serviceUrl": service_url, "brokerServiceUrl": broker_service_url}
    if service_url_tls:
        doc["serviceUrlTls"] = service_url_tls
    if broker_service_url_tls:
        doc["brokerServiceUrlTls"] = broker_service_url_tls
    return doc


class ClusterResources:
    def __init__(self, js: JsonStore) -> None:
        self._js = js

    @staticmethod
    def path(cluster: str) -> str:
        return f"{ROOT}/{cluster}"

    async def list(self) -> list[str]:
        return await self._js.children(ROOT)

    async def get(self, cluster: str) -> Doc | None:
        return await self._js.get(self.path(cluster))

    async def exists(self, cluster: str) -> bool:
        return await self._js.exists(self.path(cluster))

    async def create(self, cluster: str, data: Doc) -> None:
        if not await self._js.create(self.path(cluster), data):
            raise AlreadyExistsError(f"Cluster {cluster} already exists")

    async def put(self, cluster: str, data: Doc) -> None:
        await self._js.put(self.path(cluster), data)

    async def update(self, cluster: str, data: Doc) -> None:
        if not await self.exists(cluster):
            raise ClusterNotFoundError("Cluster does not exist")
        await self._js.put(self.path(cluster), data)

    async def delete(self, cluster: str) -> None:
        if not await self._js.delete(self.path(cluster)):
            raise ClusterNotFoundError("Cluster does not exist")
