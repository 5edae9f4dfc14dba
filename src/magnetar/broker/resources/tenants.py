"""Tenants at ``/admin/policies/{tenant}`` (TenantInfo JSON).

Theory of operation: a tenant is a node holding ``{"adminRoles": [...],
"allowedClusters": [...]}``; its namespaces are its children
(``/admin/policies/{tenant}/{ns}``).  Deleting a tenant that still has
namespaces is refused (HTTP 409), as Pulsar does.
"""

from __future__ import annotations

from collections.abc import Iterable

from magnetar.broker.errors import AlreadyExistsError, TenantNotFoundError
from magnetar.broker.resources.base import Doc, JsonStore

ROOT = "/admin/policies"


def tenant_info(allowed_clusters: Iterable[str], admin_roles: Iterable[str] = ()) -> Doc:
    return {"adminRoles": sorted(set(admin_roles)), "allowedClusters": sorted(set(allowed_clusters))}


class TenantResources:
    def __init__(self, js: JsonStore) -> None:
        self._js = js

    @staticmethod
    def path(tenant: str) -> str:
        return f"{ROOT}/{tenant}"

    async def list(self) -> list[str]:
        return await self._js.children(ROOT)

    async def get(self, tenant: str) -> Doc | None:
        return await self._js.get(self.path(tenant))

    async def exists(self, tenant: str) -> bool:
        return await self._js.exists(self.path(tenant))

    async def create(self, tenant: str, info: Doc) -> None:
        if not await self._js.create(self.path(tenant), info):
            raise AlreadyExistsError("Tenant already exists")

    async def update(self, tenant: str, info: Doc) -> None:
        if not await self.exists(tenant):
            raise TenantNotFoundError("Tenant does not exist")
        await self._js.put(self.path(tenant), info)

    async def delete(self, tenant: str) -> None:
        if not await self.exists(tenant):
            raise TenantNotFoundError("Tenant does not exist")
        if await self._js.children(self.path(tenant)):
            raise AlreadyExistsError("The tenant still has active namespaces")
        await self._js.delete(self.path(tenant))

    async def require(self, tenant: str) -> Doc:
        doc = await self.get(tenant)
        if doc is None:
            raise TenantNotFoundError("Tenant does not exist")
        return doc
