"""Schema registry resources: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``.

Theory of operation: the schema registry is a later issue.  Until then every
read answers what Pulsar answers for a topic without a schema -- 404
``{"reason": "Schema not found"}`` -- which the C++ client's HTTP lookup treats
as "no schema" rather than an error.  The router exists so the later issue only
fills the handlers in.
"""

from __future__ import annotations

from fastapi import APIRouter

from magnetar.web.errors import WebError

router = APIRouter(tags=["schemas"])


@router.get("/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema")
async def get_latest_schema(tenant: str, namespace: str, topic: str) -> dict:
    raise WebError(404, "Schema not found")


@router.get("/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema/{version}")
async def get_schema_version(tenant: str, namespace: str, topic: str, version: str) -> dict:
    raise WebError(404, "Schema not found")
