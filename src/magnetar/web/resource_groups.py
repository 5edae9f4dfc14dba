"""Resource groups: ``/admin/v2/resourcegroups`` (superuser only, see ``web.auth``).

Theory of operation: thin handlers over ``AdminService.resource_groups``
(``broker.admin.resource_groups``).  Pulsar's answers: GET list -> JSON array
of names; GET one -> the ``ResourceGroup`` JSON (404 unknown); PUT creates or
updates -> 204; DELETE -> 204 (404 unknown, 409 still named by a namespace).
The body is the shared ``ResourceGroup`` model, so malformed JSON or a rate
below -1 answers 400 with the field at fault.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from magnetar.common import rest_models as m
from magnetar.web.deps import admin, no_content

router = APIRouter(tags=["resourcegroups"])

RG = "/admin/v2/resourcegroups"


@router.get(RG)
async def list_resource_groups(request: Request) -> list[str]:
    return await admin(request).resource_groups.list()


@router.get(RG + "/{name}")
async def get_resource_group(request: Request, name: str) -> dict:
    return await admin(request).resource_groups.get(name)


@router.put(RG + "/{name}", status_code=204)
async def put_resource_group(request: Request, name: str, body: m.ResourceGroup) -> Response:
    await admin(request).resource_groups.put(name, body)
    return no_content()


@router.delete(RG + "/{name}", status_code=204)
async def delete_resource_group(request: Request, name: str) -> Response:
    await admin(request).resource_groups.delete(name)
    return no_content()
