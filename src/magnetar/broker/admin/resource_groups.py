"""Resource groups: the admin operations behind ``/admin/v2/resourcegroups``.

Theory of operation: a group is one document at ``/admin/resourcegroups/{name}``
(``broker.resources.resource_groups``) holding Pulsar's ``ResourceGroup`` body.
PUT creates or updates: on create an absent field is stored as -1 (no
limit); on update only the fields the body carries change (``pulsar-admin
resourcegroups update --msg-publish-rate 400`` leaves the other rates alone).
Rates below -1 are refused by the body model (400).  The name follows
Pulsar's name rule (412 otherwise).  GET of an unknown group answers 404;
DELETE of a group some namespace still names answers 409 with the
namespaces, so enforcement never loses its group under a live namespace.
:meth:`ResourceGroupAdmin.require` is the check behind the namespace call
``POST .../resourcegroup/{name}`` (412 for an unknown group).

The broker's limiters (``broker.service.resource_groups``) see every write
through the metadata store's notifications; a write here also wakes this
broker's limiters directly so the change holds within milliseconds.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors
from magnetar.broker.admin.tenancy import check_name
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.resources.resource_groups import ResourceGroupResources
from magnetar.broker.service.api import BrokerServiceView
from magnetar.common.lazy_import import lazy_import

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)


class ResourceGroupNotFoundError(errors.BrokerError):
    http_status = 404


class ResourceGroupInUseError(errors.BrokerError):
    http_status = 409


class ResourceGroupAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc
        self._res = ResourceGroupResources(JsonStore(svc.metadata_store))

    async def list(self) -> list[str]:
        return await self._res.list()

    async def get(self, name: str) -> dict[str, Any]:
        doc = await self._res.get(name)
        if doc is None:
            raise ResourceGroupNotFoundError(f"ResourceGroup {name} does not exist")
        return m.dump(m.ResourceGroup.model_validate(_filled(doc)))

    async def put(self, name: str, body: m.ResourceGroup) -> None:
        """Create, or update the fields ``body`` carries."""
        check_name("ResourceGroup", name)
        old = await self._res.get(name) or {}
        given = {k: v for k, v in m.dump(body).items() if v is not None}
        await self._res.put(name, _filled({**old, **given}))
        await self._refresh()

    async def delete(self, name: str) -> None:
        if not await self._res.exists(name):
            raise ResourceGroupNotFoundError(f"ResourceGroup {name} does not exist")
        users = await self._res.namespaces_using(name)
        if users:
            raise ResourceGroupInUseError(
                f"ResourceGroup {name} is in use by namespaces {', '.join(users)}; "
                "remove it from them first (namespaces remove-resource-group)"
            )
        await self._res.delete(name)
        await self._refresh()

    async def require(self, name: str) -> None:
        """412 unless the group exists (attaching a namespace to it)."""
        check_name("ResourceGroup", name)
        if not await self._res.exists(name):
            raise errors.PreconditionFailedError(f"ResourceGroup {name} does not exist")

    async def _refresh(self) -> None:
        groups = getattr(self._svc, "resource_groups", None)
        if groups is not None:
            await groups.refresh()


def _filled(doc: dict[str, Any]) -> dict[str, Any]:
    """Every ResourceGroup field present (-1 where absent), unknown fields kept."""
    out = dict(doc)
    for field in m.wire_names(m.ResourceGroup):
        if out.get(field) is None:
            out[field] = -1
    return out
