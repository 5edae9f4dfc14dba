"""Partitioned-topic metadata at ``/admin/partitioned-topics/{t}/{ns}/{domain}/{topic}``.

Theory of operation: a partitioned topic exists exactly when this node exists;
its value is ``{"partitions": N}`` (plus ``properties`` when set).  The
partitions themselves are ordinary topics named ``<topic>-partition-<i>``,
created lazily by the broker when a client first uses them.  The local name
is stored URL-encoded as Pulsar does, so names with ``/`` stay one segment.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from magnetar.broker.errors import AlreadyExistsError, TopicNotFoundError
from magnetar.broker.resources.base import Doc, JsonStore
from magnetar.metadata.api import NotFound

ROOT = "/admin/partitioned-topics"


class PartitionedTopicResources:
    def __init__(self, js: JsonStore) -> None:
        self._js = js

    @staticmethod
    def path(tenant: str, ns: str, domain: str, local_name: str) -> str:
        return f"{ROOT}/{tenant}/{ns}/{domain}/{quote(local_name, safe='')}"

    async def get(self, tenant: str, ns: str, domain: str, local_name: str) -> Doc | None:
        return await self._js.get(self.path(tenant, ns, domain, local_name))

    async def partitions(self, tenant: str, ns: str, domain: str, local_name: str) -> int | None:
        doc = await self.get(tenant, ns, domain, local_name)
        return None if doc is None else int(doc.get("partitions", 0))

    async def create(
        self,
        tenant: str,
        ns: str,
        domain: str,
        local_name: str,
        partitions: int,
        properties: dict | None = None,
    ) -> None:
        doc: Doc = {"partitions": partitions}
        if properties:
            doc["properties"] = dict(properties)
        if not await self._js.create(self.path(tenant, ns, domain, local_name), doc):
            raise AlreadyExistsError("Partitioned topic already exist")

    async def update(self, tenant: str, ns: str, domain: str, local_name: str, partitions: int) -> None:
        def set_count(doc: Doc) -> Doc:
            doc["partitions"] = partitions
            return doc

        try:
            await self._js.update(self.path(tenant, ns, domain, local_name), set_count)
        except NotFound:
            raise TopicNotFoundError("Partitioned topic does not exist") from None

    async def delete(self, tenant: str, ns: str, domain: str, local_name: str) -> bool:
        return await self._js.delete(self.path(tenant, ns, domain, local_name))

    async def list(self, tenant: str, ns: str, domain: str) -> list[str]:
        """Local names of the partitioned topics in a namespace, decoded."""
        return [unquote(n) for n in await self._js.children(f"{ROOT}/{tenant}/{ns}/{domain}")]
