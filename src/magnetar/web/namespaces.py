"""Namespace resources: ``/admin/v2/namespaces/{tenant}/{namespace}/...``.

Theory of operation: for this issue, the listing of a namespace's topics that
regex consumers on an ``http://`` service URL use
(``GET .../topics?mode=PERSISTENT|NON_PERSISTENT|ALL``): full topic names,
partitions included, system topics hidden.  Namespace lifecycle and policies
are a later issue and join this module (or siblings) then.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from magnetar.web.errors import WebError
from magnetar.web.paths import namespace_name

router = APIRouter(tags=["namespaces"])

MODES = ("PERSISTENT", "NON_PERSISTENT", "ALL")


@router.get("/admin/v2/namespaces/{tenant}/{namespace}/topics")
async def list_namespace_topics(
    request: Request, tenant: str, namespace: str, mode: str = "PERSISTENT"
) -> list[str]:
    mode = mode.upper()
    if mode not in MODES:
        raise WebError(400, f"Invalid mode {mode!r}: expected one of {', '.join(MODES)}")
    svc = request.app.state.broker_service
    return list(await svc.list_topics(namespace_name(tenant, namespace), mode=mode))
