"""Schema registry resources: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``.

Theory of operation: thin handlers over ``AdminService.schemas``
(``broker.admin.schemas.SchemaAdmin``, which drives the broker's
``SchemaRegistry`` with the effective policies: topic policy > namespace
policy > broker default).  The topic is always
``persistent://{tenant}/{namespace}/{topic}``: the registry keys by the base
name, so a partition's path answers for the whole partitioned topic, as in
Pulsar.  Without an admin service (a bare fake in unit tests) every read
answers Pulsar's "no schema" 404, which the C++ client's HTTP lookup treats as
schemaless.

What this edge decides itself:

* the request body: not JSON is 400, over 1.4 MB 413 -- a definition up to the
  registry's ceiling gets through, so an oversized one is the registry's 422
  with its reason (the admin routes' generic body limit is smaller);
* a version that is not a non-negative number is 412 "Invalid schema version"
  (a negative one would otherwise mean "latest");
* ``POST .../schema`` is not subject to ``isAllowAutoUpdateSchema``: that flag
  governs producers, and an operator's upload is how a schema gets in while it
  is off (Pulsar's postSchema passes only the strategy);
* ``POST /admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy`` (204) as
  an alias of the namespace route's PUT.

Errors are the registry's typed errors (404 "Schema not found", 409
incompatible, 422 invalid or too large) turned into ``{"reason": ...}`` by
``errors.py``.  Nothing is stored on any refusal.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response

from magnetar.broker.admin.policies import BY_NAME
from magnetar.broker.schema import SchemaVersion, resolve_policies
from magnetar.broker.schema import types as schema_types
from magnetar.broker.schema.policies import SCHEMA_BYTES_MAX_CEILING
from magnetar.broker.service.names import parse_topic
from magnetar.web.deps import admin, broker, json_body
from magnetar.web.errors import WebError

router = APIRouter(tags=["schemas"])

PREFIX = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
# A definition up to the registry's ceiling (700 KiB) plus JSON escaping.
PAYLOAD_BYTES_MAX = 2 * SCHEMA_BYTES_MAX_CEILING


def _topic(tenant: str, namespace: str, topic: str) -> str:
    return f"persistent://{tenant}/{namespace}/{topic}"


def _schemas(request: Request) -> Any:
    a = admin(request)
    if a is None or not hasattr(a, "schemas"):
        raise WebError(404, "Schema not found")
    return a.schemas


async def _payload(request: Request) -> Any:
    """The PostSchemaPayload JSON (400 not JSON, 413 too large); its shape is the registry's to judge."""
    body = await request.body()
    if len(body) > PAYLOAD_BYTES_MAX:
        raise WebError(413, f"Schema payload is {len(body)} bytes, over {PAYLOAD_BYTES_MAX}")
    try:
        return json.loads(body)
    except ValueError as e:
        raise WebError(400, f"Schema payload is not valid JSON: {e}") from None


def _version(raw: str) -> int:
    try:
        v = int(raw)
    except ValueError:
        raise WebError(412, f"Invalid schema version: {raw!r}") from None
    if v < 0:
        raise WebError(412, f"Invalid schema version: {raw!r}")
    return v


@router.get(PREFIX + "/schema")
async def get_latest_schema(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).get(_topic(tenant, namespace, topic))


@router.get(PREFIX + "/schema/{version}")
async def get_schema_version(request: Request, tenant: str, namespace: str, topic: str, version: str) -> dict:
    schemas = _schemas(request)
    return await schemas.get(_topic(tenant, namespace, topic), _version(version))


@router.get(PREFIX + "/schemas")
async def get_all_schemas(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).get_all(_topic(tenant, namespace, topic))


@router.post(PREFIX + "/schema")
async def post_schema(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    _schemas(request)  # 404 without an admin service
    name = _topic(tenant, namespace, topic)
    svc = broker(request)
    ref = parse_topic(name)
    ns_policies = await svc.resources.namespaces.get(ref.namespace)
    if ns_policies is None:
        raise WebError(404, "Namespace does not exist")
    topic_policies = await admin(request).topic_policies.document(ref) or None
    pol = resolve_policies(svc.schemas.config, ns_policies, topic_policies, is_system_topic=ref.is_system)
    info = schema_types.schema_info_from_post_payload(await _payload(request), name=ref.local_name)
    vb = await svc.schemas.put_schema_if_compatible(name, info, pol.strategy, True)
    version = SchemaVersion.from_bytes(vb)
    return schema_types.post_schema_response(version.value if version is not None else 0)


@router.delete(PREFIX + "/schema")
async def delete_schema(
    request: Request, tenant: str, namespace: str, topic: str, force: bool = False
) -> dict:
    return await _schemas(request).delete(_topic(tenant, namespace, topic), force)


@router.post(PREFIX + "/compatibility")
async def check_compatibility(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    schemas = _schemas(request)
    return await schemas.compatibility(_topic(tenant, namespace, topic), await _payload(request))


@router.post(PREFIX + "/version")
async def schema_version(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    schemas = _schemas(request)
    return await schemas.version(_topic(tenant, namespace, topic), await _payload(request))


# Pulsar's admin client sets the namespace strategy with PUT (namespaces.py serves it); some
# tooling and the wording use POST: the same write, 204.
@router.post("/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy", status_code=204)
async def post_namespace_strategy(request: Request, tenant: str, namespace: str) -> Response:
    a = admin(request)
    if a is None:
        raise WebError(404, "Namespace does not exist")
    body = await json_body(request, allow_bare_string=True)
    await a.namespaces.set_policy(f"{tenant}/{namespace}", BY_NAME["schemaCompatibilityStrategy"], body)
    return Response(status_code=204)
