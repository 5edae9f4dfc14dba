"""Clusters and tenants: ``/admin/v2/clusters/...`` and ``/admin/v2/tenants/...``.

Theory of operation: thin handlers over ``AdminService.tenancy``.  Pulsar's
quirks kept: cluster PUT/POST answer 200 with an empty body (not 204),
tenant writes answer 204, the pseudo-cluster ``global`` is hidden.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from magnetar.broker.admin.isolation import NotFoundError as IsolationNotFoundError
from magnetar.common import rest_models as m
from magnetar.common.rest_models import FailureDomain, NamespaceIsolationData
from magnetar.web.deps import admin, no_content

router = APIRouter(tags=["clusters", "tenants"])

C = "/admin/v2/clusters"
T = "/admin/v2/tenants"


@router.get(C)
async def list_clusters(request: Request) -> list[str]:
    return await admin(request).tenancy.list_clusters()


@router.get(C + "/{cluster}")
async def get_cluster(request: Request, cluster: str) -> dict:
    return await admin(request).tenancy.get_cluster(cluster)


@router.put(C + "/{cluster}", status_code=200)
async def create_cluster(request: Request, cluster: str, body: m.ClusterData) -> Response:
    await admin(request).tenancy.create_cluster(cluster, body)
    return Response(status_code=200)


@router.post(C + "/{cluster}", status_code=200)
async def update_cluster(request: Request, cluster: str, body: m.ClusterData) -> Response:
    await admin(request).tenancy.update_cluster(cluster, body)
    return Response(status_code=200)


@router.delete(C + "/{cluster}", status_code=204)
async def delete_cluster(request: Request, cluster: str) -> Response:
    await admin(request).tenancy.delete_cluster(cluster)
    return no_content()


@router.get(C + "/{cluster}/peers")
async def get_peers(request: Request, cluster: str) -> list[str]:
    return await admin(request).tenancy.get_peers(cluster)


@router.post(C + "/{cluster}/peers", status_code=204)
async def set_peers(request: Request, cluster: str, body: list[str]) -> Response:
    await admin(request).tenancy.set_peers(cluster, body)
    return no_content()


@router.get(C + "/{cluster}/failureDomains")
async def failure_domains(request: Request, cluster: str) -> dict:
    return await admin(request).isolation.failure_domains(cluster)


@router.get(C + "/{cluster}/failureDomains/{domain}")
async def failure_domain(request: Request, cluster: str, domain: str) -> dict:
    return await admin(request).isolation.failure_domain(cluster, domain)


@router.post(C + "/{cluster}/failureDomains/{domain}", status_code=204)
async def set_failure_domain(request: Request, cluster: str, domain: str, body: FailureDomain) -> Response:
    await admin(request).isolation.set_failure_domain(cluster, domain, body)
    return no_content()


@router.delete(C + "/{cluster}/failureDomains/{domain}", status_code=204)
async def delete_failure_domain(request: Request, cluster: str, domain: str) -> Response:
    await admin(request).isolation.delete_failure_domain(cluster, domain)
    return no_content()


@router.get(C + "/{cluster}/namespaceIsolationPolicies")
async def isolation_policies(request: Request, cluster: str) -> dict:
    return await admin(request).isolation.isolation_policies(cluster)


@router.get(C + "/{cluster}/namespaceIsolationPolicies/brokers")
async def isolation_brokers(request: Request, cluster: str) -> list[dict]:
    a = admin(request)
    return await a.isolation.brokers_with_policies(cluster, await a.brokers.list_brokers(cluster))


@router.get(C + "/{cluster}/namespaceIsolationPolicies/brokers/{broker}")
async def isolation_broker(request: Request, cluster: str, broker: str) -> dict:
    a = admin(request)
    found = await a.isolation.brokers_with_policies(cluster, [broker])
    if broker not in await a.brokers.list_brokers(cluster) or not found:
        raise IsolationNotFoundError(f"Broker {broker} is not in any isolation policy")
    return found[0]


@router.get(C + "/{cluster}/namespaceIsolationPolicies/{policy}")
async def isolation_policy(request: Request, cluster: str, policy: str) -> dict:
    return await admin(request).isolation.isolation_policy(cluster, policy)


@router.post(C + "/{cluster}/namespaceIsolationPolicies/{policy}", status_code=204)
async def set_isolation_policy(
    request: Request, cluster: str, policy: str, body: NamespaceIsolationData
) -> Response:
    await admin(request).isolation.set_isolation_policy(cluster, policy, body)
    return no_content()


@router.delete(C + "/{cluster}/namespaceIsolationPolicies/{policy}", status_code=204)
async def delete_isolation_policy(request: Request, cluster: str, policy: str) -> Response:
    await admin(request).isolation.delete_isolation_policy(cluster, policy)
    return no_content()


@router.get(T)
async def list_tenants(request: Request) -> list[str]:
    return await admin(request).tenancy.list_tenants()


@router.get(T + "/{tenant}")
async def get_tenant(request: Request, tenant: str) -> dict:
    return await admin(request).tenancy.get_tenant(tenant)


@router.put(T + "/{tenant}", status_code=204)
async def create_tenant(request: Request, tenant: str, body: m.TenantInfo | None = None) -> Response:
    await admin(request).tenancy.create_tenant(tenant, body or m.TenantInfo())
    return no_content()


@router.post(T + "/{tenant}", status_code=204)
async def update_tenant(request: Request, tenant: str, body: m.TenantInfo) -> Response:
    await admin(request).tenancy.update_tenant(tenant, body)
    return no_content()


@router.delete(T + "/{tenant}", status_code=204)
async def delete_tenant(request: Request, tenant: str, force: bool = False) -> Response:
    await admin(request).tenancy.delete_tenant(tenant, force)
    return no_content()
