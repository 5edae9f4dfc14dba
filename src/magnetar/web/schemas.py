"""Schema registry resources: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``.

Theory of operation: thin handlers over ``AdminService.schemas`` (which
drives ``broker.schema.SchemaRegistry`` with the effective compatibility
strategy).  Without an admin service (a bare fake in unit tests) every read
answers Pulsar's "no schema" 404, which the C++ client's HTTP lookup treats
as schemaless.  Shapes: GetSchemaResponse, ``{"version": {"version": N}}``
on POST, ``{"version": N}`` on DELETE and ``/version``, ``{"compatibility",
"schemaCompatibilityStrategy"}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from magnetar.web.deps import admin, json_body
from magnetar.web.errors import WebError

router = APIRouter(tags=["schemas"])

S = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"


def _topic(tenant: str, namespace: str, topic: str) -> str:
    return f"persistent://{tenant}/{namespace}/{topic}"


def _schemas(request: Request) -> Any:
    a = admin(request)
    if a is None:
        raise WebError(404, "Schema not found")
    return a.schemas


@router.get(S + "/schema")
async def get_latest_schema(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).get(_topic(tenant, namespace, topic))


@router.get(S + "/schema/{version}")
async def get_schema_version(request: Request, tenant: str, namespace: str, topic: str, version: str) -> dict:
    try:
        v = int(version)
    except ValueError:
        raise WebError(404, "Schema not found") from None
    return await _schemas(request).get(_topic(tenant, namespace, topic), v)


@router.get(S + "/schemas")
async def get_all_schemas(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).get_all(_topic(tenant, namespace, topic))


@router.post(S + "/schema")
async def post_schema(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).post(_topic(tenant, namespace, topic), await json_body(request))


@router.delete(S + "/schema")
async def delete_schema(
    request: Request, tenant: str, namespace: str, topic: str, force: bool = False
) -> dict:
    return await _schemas(request).delete(_topic(tenant, namespace, topic), force)


@router.post(S + "/compatibility")
async def check_compatibility(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).compatibility(_topic(tenant, namespace, topic), await json_body(request))


@router.post(S + "/version")
async def schema_version(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _schemas(request).version(_topic(tenant, namespace, topic), await json_body(request))
