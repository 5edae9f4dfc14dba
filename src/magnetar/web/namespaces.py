"""Namespace resources: ``/admin/v2/namespaces/{tenant}/{namespace}/...``.

Theory of operation: lifecycle (list/create/delete/get Policies), topic
listing, bundles, unload, clear backlog, unsubscribe, permissions,
properties, and one GET/set/DELETE route triple per policy of the policy
table (``broker.admin.policies.SPECS``), generated with a typed body so the
OpenAPI document shows each policy's JSON shape.  Specific routes are
registered before the generated ones and before ``DELETE /{bundle}`` so
Starlette's first-match routing picks them.  Handlers hold no logic: one call
into ``AdminService.namespaces`` each.
"""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Any

from fastapi import APIRouter, Body, Request, Response
from pydantic import BaseModel

from magnetar.broker.admin import policies as p
from magnetar.common import rest_models as m
from magnetar.common.admin_policies import BY_NAME
from magnetar.web.deps import (
    admin,
    broker,
    json_body,
    no_content,
    path_param,
    request_param,
    value_or_204,
    with_signature,
)
from magnetar.web.errors import WebError
from magnetar.web.ownership import forward_unload
from magnetar.web.paths import namespace_name

router = APIRouter(tags=["namespaces"])

MODES = ("PERSISTENT", "NON_PERSISTENT", "ALL")
NS = "/admin/v2/namespaces/{tenant}/{namespace}"


@router.get("/admin/v2/namespaces/{tenant}")
async def list_namespaces(request: Request, tenant: str) -> list[str]:
    return await admin(request).namespaces.list(tenant)


@router.get(NS + "/topics")
async def list_namespace_topics(
    request: Request, tenant: str, namespace: str, mode: str = "PERSISTENT"
) -> list[str]:
    mode = mode.upper()
    if mode not in MODES:
        raise WebError(400, f"Invalid mode {mode!r}: expected one of {', '.join(MODES)}")
    svc = broker(request)
    return list(await svc.list_topics(namespace_name(tenant, namespace), mode=mode))


@router.get(NS)
async def get_policies(request: Request, tenant: str, namespace: str) -> dict:
    return await admin(request).namespaces.policies(namespace_name(tenant, namespace))


@router.put(NS, status_code=204)
async def create_namespace(request: Request, tenant: str, namespace: str) -> Response:
    body = await json_body(request, optional=True)
    if body is not None and not isinstance(body, dict):
        raise WebError(400, "namespace policies must be a JSON object")
    await admin(request).namespaces.create(tenant, namespace, body)
    return no_content()


@router.delete(NS, status_code=204)
async def delete_namespace(
    request: Request, tenant: str, namespace: str, force: bool = False, authoritative: bool = False
) -> Response:
    await admin(request).namespaces.delete(namespace_name(tenant, namespace), force)
    return no_content()


@router.get(NS + "/bundles")
async def get_bundles(request: Request, tenant: str, namespace: str) -> dict:
    return await admin(request).namespaces.bundles(namespace_name(tenant, namespace))


@router.put(NS + "/unload", status_code=204)
async def unload_namespace(request: Request, tenant: str, namespace: str) -> Response:
    elsewhere = await admin(request).namespaces.unload(namespace_name(tenant, namespace))
    for bundle in elsewhere:  # owned by other brokers: each owner unloads its own (as Pulsar does)
        await forward_unload(request, bundle)
    return no_content()


@router.put(NS + "/{bundle}/unload", status_code=204)
async def unload_bundle(
    request: Request,
    tenant: str,
    namespace: str,
    bundle: str,
    destinationBroker: str | None = None,  # noqa: N803
) -> Response:
    await admin(request).namespaces.unload_bundle(
        namespace_name(tenant, namespace), bundle, destinationBroker
    )
    return no_content()


@router.put(NS + "/{bundle}/split", status_code=204)
async def split_bundle(
    request: Request,
    tenant: str,
    namespace: str,
    bundle: str,
    unload: bool = False,
    splitAlgorithmName: str | None = None,  # noqa: N803
) -> Response:
    await admin(request).namespaces.split_bundle(
        namespace_name(tenant, namespace), bundle, splitAlgorithmName
    )
    return no_content()


@router.post(NS + "/clearBacklog", status_code=204)
async def clear_backlog(request: Request, tenant: str, namespace: str) -> Response:
    await admin(request).namespaces.policies(namespace_name(tenant, namespace))  # 404 first
    await admin(request).topics.clear_namespace_backlog(namespace_name(tenant, namespace))
    return no_content()


@router.post(NS + "/clearBacklog/{subscription}", status_code=204)
async def clear_backlog_sub(request: Request, tenant: str, namespace: str, subscription: str) -> Response:
    await admin(request).namespaces.policies(namespace_name(tenant, namespace))  # 404 first
    await admin(request).topics.clear_namespace_backlog(namespace_name(tenant, namespace), subscription)
    return no_content()


@router.post(NS + "/unsubscribe/{subscription}", status_code=204)
async def unsubscribe_ns(request: Request, tenant: str, namespace: str, subscription: str) -> Response:
    await admin(request).namespaces.policies(namespace_name(tenant, namespace))  # 404 first
    await admin(request).topics.unsubscribe_namespace(namespace_name(tenant, namespace), subscription)
    return no_content()


# ---------------------------------------------------------------- permissions
@router.get(NS + "/permissions")
async def get_permissions(request: Request, tenant: str, namespace: str) -> dict:
    return await admin(request).namespaces.permissions(namespace_name(tenant, namespace))


@router.get(NS + "/permissions/subscription")
async def get_sub_permissions(request: Request, tenant: str, namespace: str) -> dict:
    return await admin(request).namespaces.subscription_permissions(namespace_name(tenant, namespace))


@router.post(NS + "/permissions/subscription/{subscription}", status_code=204)
async def grant_sub_permission(
    request: Request, tenant: str, namespace: str, subscription: str, body: list[str] = Body(...)
) -> Response:
    await admin(request).namespaces.grant_subscription(namespace_name(tenant, namespace), subscription, body)
    return no_content()


@router.post(NS + "/permissions/{role}", status_code=204)
async def grant_permission(
    request: Request, tenant: str, namespace: str, role: str, body: list[m.AuthAction] = Body(...)
) -> Response:
    await admin(request).namespaces.grant(namespace_name(tenant, namespace), role, [a.value for a in body])
    return no_content()


@router.delete(NS + "/permissions/{role}", status_code=204)
async def revoke_permission(request: Request, tenant: str, namespace: str, role: str) -> Response:
    await admin(request).namespaces.revoke(namespace_name(tenant, namespace), role)
    return no_content()


@router.delete(NS + "/permissions/{subscription}/{role}", status_code=204)
async def revoke_sub_permission(
    request: Request, tenant: str, namespace: str, subscription: str, role: str
) -> Response:
    await admin(request).namespaces.revoke_subscription(namespace_name(tenant, namespace), subscription, role)
    return no_content()


# ---------------------------------------------------------------- backlog quotas, properties, misc
@router.get(NS + "/backlogQuotaMap")
async def get_backlog_quota_map(request: Request, tenant: str, namespace: str) -> dict:
    return await admin(request).namespaces.backlog_quota_map(namespace_name(tenant, namespace))


@router.post(NS + "/backlogQuota", status_code=204)
async def set_backlog_quota(
    request: Request,
    tenant: str,
    namespace: str,
    body: m.BacklogQuota,
    backlogQuotaType: m.BacklogQuotaType = m.BacklogQuotaType.DESTINATION_STORAGE,  # noqa: N803
) -> Response:
    await admin(request).namespaces.set_backlog_quota(
        namespace_name(tenant, namespace), backlogQuotaType.value, m.dump(body)
    )
    return no_content()


@router.delete(NS + "/backlogQuota", status_code=204)
async def remove_backlog_quota(
    request: Request,
    tenant: str,
    namespace: str,
    backlogQuotaType: m.BacklogQuotaType = m.BacklogQuotaType.DESTINATION_STORAGE,  # noqa: N803
) -> Response:
    await admin(request).namespaces.remove_backlog_quota(
        namespace_name(tenant, namespace), backlogQuotaType.value
    )
    return no_content()


@router.get(NS + "/properties")
async def get_properties(request: Request, tenant: str, namespace: str) -> dict:
    return await admin(request).namespaces.properties(namespace_name(tenant, namespace))


@router.put(NS + "/properties", status_code=204)
async def set_properties(request: Request, tenant: str, namespace: str, body: dict[str, str]) -> Response:
    await admin(request).namespaces.set_properties(namespace_name(tenant, namespace), body)
    return no_content()


@router.delete(NS + "/properties", status_code=204)
async def clear_properties(request: Request, tenant: str, namespace: str) -> Response:
    await admin(request).namespaces.clear_properties(namespace_name(tenant, namespace))
    return no_content()


@router.get(NS + "/property/{key}")
async def get_property(request: Request, tenant: str, namespace: str, key: str) -> Response:
    return value_or_204(
        (await admin(request).namespaces.properties(namespace_name(tenant, namespace))).get(key)
    )


@router.put(NS + "/property/{key}/{value}", status_code=204)
async def set_property(request: Request, tenant: str, namespace: str, key: str, value: str) -> Response:
    await admin(request).namespaces.set_property(namespace_name(tenant, namespace), key, value)
    return no_content()


@router.delete(NS + "/property/{key}", status_code=204)
async def remove_property(request: Request, tenant: str, namespace: str, key: str) -> Response:
    await admin(request).namespaces.remove_property(namespace_name(tenant, namespace), key)
    return no_content()


@router.get(NS + "/resourcegroup")
async def get_resource_group(request: Request, tenant: str, namespace: str) -> Response:
    pol = await admin(request).namespaces.policies(namespace_name(tenant, namespace))
    return value_or_204(pol.get("resource_group_name"))


@router.post(NS + "/resourcegroup/{name}", status_code=204)
async def set_resource_group(request: Request, tenant: str, namespace: str, name: str) -> Response:
    await admin(request).namespaces.set_resource_group(namespace_name(tenant, namespace), name)
    return no_content()


@router.delete(NS + "/resourcegroup", status_code=204)
async def remove_resource_group(request: Request, tenant: str, namespace: str) -> Response:
    await admin(request).namespaces.set_resource_group(namespace_name(tenant, namespace), None)
    return no_content()


@router.post(NS + "/antiAffinity", status_code=204)
async def set_anti_affinity(request: Request, tenant: str, namespace: str) -> Response:
    body = await json_body(request, allow_bare_string=True)  # the Java client sends it unquoted
    spec = p.BY_NS_SUFFIX["antiAffinity"]
    await admin(request).namespaces.set_policy(namespace_name(tenant, namespace), spec, body)
    return no_content()


@router.post(NS + "/dispatcherPauseOnAckStatePersistent", status_code=204)
async def set_pause_on_ack(request: Request, tenant: str, namespace: str) -> Response:
    ns = namespace_name(tenant, namespace)
    await admin(request).namespaces._update(
        ns, lambda d: d.__setitem__("dispatcherPauseOnAckStatePersistentEnabled", True)
    )
    return no_content()


@router.delete(NS + "/dispatcherPauseOnAckStatePersistent", status_code=204)
async def clear_pause_on_ack(request: Request, tenant: str, namespace: str) -> Response:
    ns = namespace_name(tenant, namespace)
    await admin(request).namespaces._update(
        ns, lambda d: d.__setitem__("dispatcherPauseOnAckStatePersistentEnabled", None)
    )
    return no_content()


@router.get(NS + "/dispatcherPauseOnAckStatePersistent")
async def get_pause_on_ack(request: Request, tenant: str, namespace: str) -> Response:
    pol = await admin(request).namespaces.policies(namespace_name(tenant, namespace))
    return value_or_204(pol.get("dispatcherPauseOnAckStatePersistentEnabled"))


# ---------------------------------------------------------------- generated policy routes
def body_type(kind: Any) -> Any:
    if isinstance(kind, p.Model):
        return kind.resolve()
    if kind in (p.INT, p.LONG):
        return int
    if kind == p.BOOL:
        return bool
    if kind in (p.CLUSTERS,):
        return list[str]
    if kind == p.SUBTYPES:
        return list[m.SubscriptionType]
    if kind == p.STRING:
        return str
    if isinstance(kind, type) and issubclass(kind, Enum | BaseModel):
        return kind
    raise AssertionError(kind)


def to_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return m.dump(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def _register(spec: p.PolicySpec) -> None:
    path = f"{NS}/{spec.ns_suffix}"
    base = [request_param(), path_param("tenant"), path_param("namespace")]

    async def get_policy(*, request: Request, tenant: str, namespace: str) -> Response:
        return value_or_204(
            await admin(request).namespaces.get_policy(namespace_name(tenant, namespace), spec)
        )

    async def set_policy(*, request: Request, tenant: str, namespace: str, body: Any) -> Response:
        await admin(request).namespaces.set_policy(namespace_name(tenant, namespace), spec, to_json(body))
        return no_content()

    async def delete_policy(*, request: Request, tenant: str, namespace: str) -> Response:
        await admin(request).namespaces.delete_policy(namespace_name(tenant, namespace), spec)
        return no_content()

    body = inspect.Parameter(
        "body", inspect.Parameter.KEYWORD_ONLY, annotation=body_type(spec.kind), default=Body(...)
    )
    name = spec.ns_suffix.replace("/", "_")
    router.add_api_route(path, with_signature(get_policy, base), methods=["GET"], name=f"get_ns_{name}")
    router.add_api_route(
        path,
        with_signature(set_policy, [*base, body]),
        methods=[spec.ns_set],
        status_code=204,
        name=f"set_ns_{name}",
    )
    remove = BY_NAME[spec.name].ns_remove  # e.g. DELETE .../removeOffloadPolicies
    delete_path = f"{NS}/{remove}" if isinstance(remove, str) else path
    router.add_api_route(
        delete_path,
        with_signature(delete_policy, base),
        methods=["DELETE"],
        status_code=204,
        name=f"delete_ns_{name}",
    )


for _spec in p.SPECS:
    if _spec.ns_suffix and _spec.ns_suffix != "antiAffinity":
        _register(_spec)
    elif _spec.ns_suffix == "antiAffinity":
        pass


@router.get(NS + "/antiAffinity")
async def get_anti_affinity(request: Request, tenant: str, namespace: str) -> Response:
    spec = p.BY_NS_SUFFIX["antiAffinity"]
    return value_or_204(await admin(request).namespaces.get_policy(namespace_name(tenant, namespace), spec))


@router.delete(NS + "/antiAffinity", status_code=204)
async def delete_anti_affinity(request: Request, tenant: str, namespace: str) -> Response:
    spec = p.BY_NS_SUFFIX["antiAffinity"]
    await admin(request).namespaces.delete_policy(namespace_name(tenant, namespace), spec)
    return no_content()


@router.delete(NS + "/{bundle}", status_code=204)
async def delete_bundle(
    request: Request, tenant: str, namespace: str, bundle: str, force: bool = False
) -> Response:
    ns = namespace_name(tenant, namespace)
    if bundle not in await admin(request).namespaces.bundle_names(ns):
        raise WebError(404, f"Bundle {bundle} not found")
    svc = broker(request)
    if await svc.list_topics(ns, mode="ALL"):
        raise WebError(409, "Cannot delete non empty bundle")
    return no_content()
