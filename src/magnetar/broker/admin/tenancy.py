"""Clusters and tenants: the admin operations over their metadata records.

Theory of operation: clusters live at ``/admin/clusters/{c}`` and tenants at
``/admin/policies/{t}`` (the broker's typed resources).  This module adds what
the REST contract requires around them: Pulsar's name rule (412 on an invalid
name), existence checks with Pulsar's messages (404/409), the tenant's
``allowedClusters`` being non-empty and made of known clusters (412), and
refusing to delete a cluster a tenant or namespace still uses (412) or a
tenant that still has namespaces (409).
"""

from __future__ import annotations

import re
from typing import Any

from magnetar.broker import errors
from magnetar.broker.service.api import BrokerServiceView
from magnetar.common.lazy_import import lazy_import

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)

NAME_RE = re.compile(r"^[-=:.\w]+$")
NAME_LEN_MAX = 255
GLOBAL_CLUSTER = "global"


def config_flag(config: Any, attr: str, key: str, default: bool = False) -> bool:
    """A boolean broker setting that may be a typed field or only an extra property."""
    value = getattr(config, attr, None)
    if value is None:
        props = getattr(config, "as_properties", dict)()
        value = props.get(key, default)
    return str(value).lower() == "true" if isinstance(value, str) else bool(value)


def check_name(kind: str, name: str) -> None:
    if not name or len(name) > NAME_LEN_MAX or not NAME_RE.match(name) or name in (".", ".."):
        raise errors.PreconditionFailedError(f"{kind} name is not valid: {name!r}")


class TenancyAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc
        self._res = svc.resources

    # ------------------------------------------------------------ clusters
    async def list_clusters(self) -> list[str]:
        return sorted(c for c in await self._res.clusters.list() if c != GLOBAL_CLUSTER)

    async def get_cluster(self, cluster: str) -> dict:
        doc = await self._res.clusters.get(cluster)
        if doc is None:
            raise errors.ClusterNotFoundError("Cluster does not exist")
        return m.dump(m.ClusterData.model_validate(doc)) | {
            k: v for k, v in doc.items() if k not in m.wire_names(m.ClusterData)
        }

    async def create_cluster(self, cluster: str, data: m.ClusterData) -> None:
        check_name("Cluster", cluster)
        await self._res.clusters.create(cluster, _compact(m.dump(data)))

    async def update_cluster(self, cluster: str, data: m.ClusterData) -> None:
        if not await self._res.clusters.exists(cluster):
            raise errors.ClusterNotFoundError("Cluster does not exist")
        await self._res.clusters.put(cluster, _compact(m.dump(data)))

    async def delete_cluster(self, cluster: str) -> None:
        if not await self._res.clusters.exists(cluster):
            raise errors.ClusterNotFoundError("Cluster does not exist")
        for tenant in await self._res.tenants.list():
            info = await self._res.tenants.get(tenant) or {}
            if cluster in info.get("allowedClusters", []):
                raise errors.PreconditionFailedError("Cluster not empty")
        from magnetar.broker.admin.isolation import IsolationAdmin  # noqa: PLC0415 -- cycle-free, late

        await IsolationAdmin(self._svc).forget_cluster(cluster)
        await self._res.clusters.delete(cluster)

    async def get_peers(self, cluster: str) -> list[str]:
        doc = await self._res.clusters.get(cluster)
        if doc is None:
            raise errors.ClusterNotFoundError("Cluster does not exist")
        return list(doc.get("peerClusterNames") or [])

    async def set_peers(self, cluster: str, peers: list[str]) -> None:
        doc = await self._res.clusters.get(cluster)
        if doc is None:
            raise errors.ClusterNotFoundError("Cluster does not exist")
        for p in peers:
            if p == cluster:
                raise errors.PreconditionFailedError(f"{cluster} cannot be a peer of itself")
            if not await self._res.clusters.exists(p):
                raise errors.PreconditionFailedError(f"Peer cluster {p} does not exist")
        await self._res.clusters.put(cluster, {**doc, "peerClusterNames": sorted(set(peers))})

    # ------------------------------------------------------------ tenants
    async def list_tenants(self) -> list[str]:
        return sorted(await self._res.tenants.list())

    async def get_tenant(self, tenant: str) -> dict:
        doc = await self._res.tenants.get(tenant)
        if doc is None:
            raise errors.TenantNotFoundError("Tenant does not exist")
        return {
            "adminRoles": list(doc.get("adminRoles", [])),
            "allowedClusters": list(doc.get("allowedClusters", [])),
        }

    async def _check_clusters(self, clusters: list[str]) -> None:
        if not clusters:
            raise errors.PreconditionFailedError("Clusters can not be empty")
        known = set(await self._res.clusters.list())
        for c in clusters:
            if c not in known:
                raise errors.PreconditionFailedError(f"Clusters do not exist: {c}")

    async def create_tenant(self, tenant: str, info: m.TenantInfo) -> None:
        check_name("Tenant", tenant)
        await self._check_clusters(info.allowed_clusters)
        await self._res.tenants.create(tenant, _tenant_doc(info))

    async def update_tenant(self, tenant: str, info: m.TenantInfo) -> None:
        old = await self._res.tenants.get(tenant)
        if old is None:
            raise errors.TenantNotFoundError("Tenant does not exist")
        await self._check_clusters(info.allowed_clusters)
        removed = set(old.get("allowedClusters", [])) - set(info.allowed_clusters)
        if removed:
            for ns in await self._res.namespaces.list(tenant):
                pol = await self._res.namespaces.get(ns) or {}
                used = removed & set(pol.get("replication_clusters", []))
                if used:
                    raise errors.AlreadyExistsError(
                        f"Cluster {sorted(used)[0]} is still used by namespace {ns}"
                    )
        await self._res.tenants.update(tenant, _tenant_doc(info))

    async def delete_tenant(self, tenant: str, force: bool = False) -> None:
        if not await self._res.tenants.exists(tenant):
            raise errors.TenantNotFoundError("Tenant does not exist")
        if force:
            if not config_flag(self._svc.config, "force_delete_tenant_allowed", "forceDeleteTenantAllowed"):
                raise errors.NotAllowedError("Broker doesn't allow forced deletion of tenants")
        await self._res.tenants.delete(tenant)


def _tenant_doc(info: m.TenantInfo) -> dict:
    return {
        "adminRoles": sorted(set(info.admin_roles)),
        "allowedClusters": sorted(set(info.allowed_clusters)),
    }


def _compact(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if v is not None and v is not False}
