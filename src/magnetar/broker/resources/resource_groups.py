"""Resource groups in the metadata store: ``/admin/resourcegroups/{name}``, and who uses them.

Theory of operation: a resource group is one JSON document in Pulsar's field
names (``publishRateInMsgs``, ``publishRateInBytes``, ``dispatchRateInMsgs``,
``dispatchRateInBytes``; per second, for the whole cluster; -1 or 0: no
limit) at Pulsar's path.  A namespace joins a group through the
``resource_group_name`` field of its Policies document
(``/admin/policies/{tenant}/{ns}``), so "who uses group G" is a scan of the
namespace documents: :meth:`ResourceGroupResources.namespaces_using` (admin
refusals) and :meth:`ResourceGroupResources.attachments` (every group's
namespaces at once, for the broker's limiters) read them.  The scan reads
nothing when no group exists.

:class:`GroupQuota` is the typed value of one document, shared by the admin
layer (which writes it) and the broker's limiters (which enforce it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.broker.resources.base import Doc, JsonStore
from magnetar.broker.resources.namespaces import ROOT as NAMESPACE_ROOT

ROOT = "/admin/resourcegroups"
FIELDS = ("publishRateInMsgs", "publishRateInBytes", "dispatchRateInMsgs", "dispatchRateInBytes")
UNLIMITED = -1


def _rate(value: Any) -> int:
    """A stored rate as an int; None, 0 and negatives mean no limit (-1)."""
    try:
        v = int(value)
    except (TypeError, ValueError):
        return UNLIMITED
    return v if v > 0 else UNLIMITED


@dataclass(frozen=True, slots=True)
class GroupQuota:
    """One group's cluster-wide quotas per second (``UNLIMITED``: not limited)."""

    publish_msgs: int = UNLIMITED
    publish_bytes: int = UNLIMITED
    dispatch_msgs: int = UNLIMITED
    dispatch_bytes: int = UNLIMITED

    @classmethod
    def from_doc(cls, doc: Doc | None) -> GroupQuota:
        if not doc:
            return NO_QUOTA
        return cls(*(_rate(doc.get(f)) for f in FIELDS))

    def shared_by(self, brokers: int) -> GroupQuota:
        """This quota split evenly over ``brokers`` brokers (each gets at least 1 per second)."""
        n = max(1, brokers)
        if n == 1:
            return self
        return GroupQuota(*(v if v <= 0 else max(1, -(-v // n)) for v in self.values()))

    def values(self) -> tuple[int, int, int, int]:
        return (self.publish_msgs, self.publish_bytes, self.dispatch_msgs, self.dispatch_bytes)


NO_QUOTA = GroupQuota()


class ResourceGroupResources:
    def __init__(self, js: JsonStore) -> None:
        self._js = js

    @staticmethod
    def path(name: str) -> str:
        return f"{ROOT}/{name}"

    async def list(self) -> list[str]:
        return sorted(await self._js.children(ROOT))

    async def get(self, name: str) -> Doc | None:
        return await self._js.get(self.path(name))

    async def exists(self, name: str) -> bool:
        return await self._js.exists(self.path(name))

    async def put(self, name: str, doc: Doc) -> None:
        await self._js.put(self.path(name), doc)

    async def delete(self, name: str) -> bool:
        return await self._js.delete(self.path(name))

    async def all(self) -> dict[str, Doc]:
        """Every group's document, by name (empty without a read per namespace when none exist)."""
        out = {}
        for name in await self.list():
            doc = await self.get(name)
            if doc is not None:
                out[name] = doc
        return out

    async def attachments(self) -> dict[str, list[str]]:
        """group name -> the namespaces (``tenant/ns``) whose policies name it."""
        out: dict[str, list[str]] = {}
        for tenant in sorted(await self._js.children(NAMESPACE_ROOT)):
            for ns in sorted(await self._js.children(f"{NAMESPACE_ROOT}/{tenant}")):
                doc = await self._js.get(f"{NAMESPACE_ROOT}/{tenant}/{ns}")
                group = (doc or {}).get("resource_group_name")
                if group:
                    out.setdefault(str(group), []).append(f"{tenant}/{ns}")
        return out

    async def namespaces_using(self, name: str) -> list[str]:
        return (await self.attachments()).get(name, [])
