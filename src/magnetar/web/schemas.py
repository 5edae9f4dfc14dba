"""Schema registry resources: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``.

Theory of operation: every handler is a thin call into the broker's
``SchemaRegistry`` (``broker_service.schemas``; its API and the JSON shapes
live in ``magnetar.broker.schema`` and ``schema.types``).  The topic is always
``persistent://{tenant}/{namespace}/{topic}``: the registry keys by the base
name, so a partition's path answers for the whole partitioned topic, as in
Pulsar.  The namespace must exist (404 otherwise).

The compatibility strategy, auto-update flag and validation flag are resolved
per request -- topic policy > namespace policy > broker default -- so a
``POST /admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy`` (the admin
routes in ``namespaces.py``) takes effect on the next POST/compatibility check
and on the next producer, exactly as the binary protocol path sees it.

Errors are the registry's typed errors (``SchemaError`` subclasses carry their
HTTP status): 404 "Schema not found", 409 incompatible, 422 invalid or too
large; the shared handlers in ``errors.py`` turn them into ``{"reason": ...}``.
A request body that is not JSON is 400 (over 1.4 MB 413), a version that is not a
number 412 (Pulsar's "Invalid schema version").  Nothing is stored on any
refusal: the registry validates before it writes.
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
from magnetar.web.deps import json_body
from magnetar.web.errors import WebError

router = APIRouter(tags=["schemas"])

PREFIX = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"


def _svc(request: Request) -> Any:
    return request.app.state.broker_service


async def _topic(request: Request, tenant: str, namespace: str, topic: str) -> str:
    svc = _svc(request)
    if not hasattr(svc, "schemas"):
        raise WebError(404, "Schema not found")  # a bare service (lookup-only unit tests)
    await svc.require_namespace(f"{tenant}/{namespace}")
    return f"persistent://{tenant}/{namespace}/{topic}"


async def _policies(request: Request, topic: str) -> Any:
    svc = _svc(request)
    ref = parse_topic(topic)
    ns_policies = await svc.resources.namespaces.get(ref.namespace)
    topic_policies = None
    admin = getattr(request.app.state, "admin", None)
    if admin is not None:
        try:
            topic_policies = await admin.topic_policies.document(ref.base if ref.is_partition else ref)
        except Exception:  # no topic policies stored, or the store is unreachable: namespace wins
            topic_policies = None
    return resolve_policies(svc.schemas.config, ns_policies, topic_policies, is_system_topic=ref.is_system)


# A schema payload may carry a definition up to the registry's ceiling (700 KiB) plus JSON
# escaping; anything larger is refused before it is parsed.
PAYLOAD_BYTES_MAX = 2 * SCHEMA_BYTES_MAX_CEILING


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
    name = await _topic(request, tenant, namespace, topic)
    return schema_types.get_schema_response(await _svc(request).schemas.get_schema(name))


@router.get(PREFIX + "/schema/{version}")
async def get_schema_version(request: Request, tenant: str, namespace: str, topic: str, version: str) -> dict:
    name = await _topic(request, tenant, namespace, topic)
    rec = await _svc(request).schemas.get_schema(name, _version(version))
    return schema_types.get_schema_response(rec)


@router.get(PREFIX + "/schemas")
async def get_all_schemas(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    name = await _topic(request, tenant, namespace, topic)
    recs = await _svc(request).schemas.get_all(name)
    if not recs:
        raise WebError(404, "Schema not found")
    return schema_types.get_all_schemas_response(recs)


@router.post(PREFIX + "/schema")
async def post_schema(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    name = await _topic(request, tenant, namespace, topic)
    info = schema_types.schema_info_from_post_payload(await _payload(request), name=topic)
    pol = await _policies(request, name)
    # isAllowAutoUpdateSchema governs producers only: an operator's upload is how a schema
    # gets in when it is off (Pulsar's postSchema passes only the strategy).
    vb = await _svc(request).schemas.put_schema_if_compatible(name, info, pol.strategy, True)
    version = SchemaVersion.from_bytes(vb)
    return schema_types.post_schema_response(version.value if version is not None else 0)


@router.delete(PREFIX + "/schema")
async def delete_schema(
    request: Request, tenant: str, namespace: str, topic: str, force: bool = False
) -> dict:
    name = await _topic(request, tenant, namespace, topic)
    v = await _svc(request).schemas.delete_schema(name, force)
    if v is None:
        raise WebError(404, "Schema not found")
    return schema_types.long_schema_version_response(v)


@router.post(PREFIX + "/compatibility")
async def check_compatibility(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    name = await _topic(request, tenant, namespace, topic)
    info = schema_types.schema_info_from_post_payload(await _payload(request), name=topic)
    pol = await _policies(request, name)
    ok, _reason = await _svc(request).schemas.check_compatibility(name, info, pol.strategy)
    return schema_types.compatibility_response(ok, pol.strategy.value)


@router.post(PREFIX + "/version")
async def get_version_of(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    name = await _topic(request, tenant, namespace, topic)
    info = schema_types.schema_info_from_post_payload(await _payload(request), name=topic)
    v = await _svc(request).schemas.find_version(name, info)
    if v is None:
        raise WebError(404, "Schema not found")
    return schema_types.long_schema_version_response(v)


# Pulsar's admin client sets the namespace strategy with PUT (namespaces.py serves it); some
# tooling and the wording use POST: the same write, 204.
@router.post("/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy", status_code=204)
async def post_namespace_strategy(request: Request, tenant: str, namespace: str) -> Response:
    admin = getattr(request.app.state, "admin", None)
    if admin is None:
        raise WebError(404, "Namespace does not exist")
    body = await json_body(request, allow_bare_string=True)
    await admin.namespaces.set_policy(f"{tenant}/{namespace}", BY_NAME["schemaCompatibilityStrategy"], body)
    return Response(status_code=204)
