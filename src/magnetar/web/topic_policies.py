"""Topic-level policies: ``/admin/v2/{domain}/{tenant}/{namespace}/{topic}/<policy>``.

Theory of operation: one GET/POST(or PUT)/DELETE triple per policy of the
policy table that has a topic suffix, generated with typed bodies (OpenAPI).
GET answers the topic's own override or 204; with ``?applied=true`` the
effective value (topic > namespace > broker default).  ``messageTTL`` takes
its value from the ``messageTTL`` query parameter as Pulsar's does.  Storage
and resolution: ``broker.admin.topic_policies``.
"""

from __future__ import annotations

import inspect

from fastapi import APIRouter, Body, Query, Request, Response

from magnetar.broker.admin import policies as p
from magnetar.common import rest_models as m
from magnetar.web.deps import admin, no_content, path_param, request_param, value_or_204, with_signature
from magnetar.web.namespaces import body_type, to_json
from magnetar.web.paths import topic_name

router = APIRouter(tags=["topic policies"])

TP = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}"


def _base() -> list[inspect.Parameter]:
    return [
        request_param(),
        path_param("domain"),
        path_param("tenant"),
        path_param("namespace"),
        path_param("topic"),
    ]


def _register(spec: p.PolicySpec) -> None:
    path = f"{TP}/{spec.topic_suffix}"
    applied = inspect.Parameter(
        "applied", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=Query(False)
    )

    async def get_policy(
        *, request: Request, domain: str, tenant: str, namespace: str, topic: str, applied: bool
    ) -> Response:
        name = topic_name(domain, tenant, namespace, topic)
        return value_or_204(await admin(request).topic_policies.get(name, spec, applied))

    async def set_policy(
        *, request: Request, domain: str, tenant: str, namespace: str, topic: str, body: object
    ) -> Response:
        await admin(request).topic_policies.set(
            topic_name(domain, tenant, namespace, topic), spec, to_json(body)
        )
        return no_content()

    async def delete_policy(
        *, request: Request, domain: str, tenant: str, namespace: str, topic: str
    ) -> Response:
        await admin(request).topic_policies.delete(topic_name(domain, tenant, namespace, topic), spec)
        return no_content()

    if spec.name == "messageTTL":
        body = inspect.Parameter(
            "body", inspect.Parameter.KEYWORD_ONLY, annotation=int, default=Query(..., alias="messageTTL")
        )
    else:
        body = inspect.Parameter(
            "body", inspect.Parameter.KEYWORD_ONLY, annotation=body_type(spec.kind), default=Body(...)
        )
    name = spec.topic_suffix
    router.add_api_route(
        path, with_signature(get_policy, [*_base(), applied]), methods=["GET"], name=f"get_topic_{name}"
    )
    router.add_api_route(
        path,
        with_signature(set_policy, [*_base(), body]),
        methods=[spec.topic_set],
        status_code=204,
        name=f"set_topic_{name}",
    )
    router.add_api_route(
        path,
        with_signature(delete_policy, _base()),
        methods=["DELETE"],
        status_code=204,
        name=f"delete_topic_{name}",
    )


for _spec in p.SPECS:
    if _spec.topic_suffix:
        _register(_spec)


@router.get(TP + "/backlogQuotaMap")
async def get_backlog_quota_map(
    request: Request, domain: str, tenant: str, namespace: str, topic: str, applied: bool = False
) -> dict:
    return await admin(request).topic_policies.backlog_quota_map(
        topic_name(domain, tenant, namespace, topic), applied
    )


@router.post(TP + "/backlogQuota", status_code=204)
async def set_backlog_quota(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    body: m.BacklogQuota,
    backlogQuotaType: m.BacklogQuotaType = m.BacklogQuotaType.DESTINATION_STORAGE,  # noqa: N803
) -> Response:
    await admin(request).topic_policies.set_backlog_quota(
        topic_name(domain, tenant, namespace, topic), backlogQuotaType.value, m.dump(body)
    )
    return no_content()


@router.delete(TP + "/backlogQuota", status_code=204)
async def remove_backlog_quota(
    request: Request,
    domain: str,
    tenant: str,
    namespace: str,
    topic: str,
    backlogQuotaType: m.BacklogQuotaType = m.BacklogQuotaType.DESTINATION_STORAGE,  # noqa: N803
) -> Response:
    await admin(request).topic_policies.remove_backlog_quota(
        topic_name(domain, tenant, namespace, topic), backlogQuotaType.value
    )
    return no_content()
