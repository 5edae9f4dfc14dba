"""JSON documents at metadata paths, with compare-and-set updates.

Theory of operation: every resource view (clusters, tenants, namespaces,
partitioned topics) stores one JSON document per node, in Pulsar's field
names, so operators find things where Pulsar keeps them.  ``update`` is a
read-modify-write loop on the node version: a concurrent writer makes the
CAS fail with BadVersion and the loop re-reads, at most ``max_attempts``
times.  Metadata-store errors are left to ``broker.errors.translate``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from magnetar.metadata.api import AlreadyExists, BadVersion, MetadataStore, NotFound

Doc = dict[str, Any]


class JsonStore:
    """Thin JSON layer over a MetadataStore."""

    def __init__(self, store: MetadataStore, max_attempts: int = 16) -> None:
        self.store = store
        self.max_attempts = max_attempts

    async def get(self, path: str) -> Doc | None:
        res = await self.store.get(path)
        if res is None:
            return None
        return json.loads(res.value) if res.value else {}

    async def exists(self, path: str) -> bool:
        return await self.store.exists(path) is not None

    async def create(self, path: str, doc: Doc) -> bool:
        """Create if absent; False if the node already exists."""
        try:
            await self.store.put(path, _dump(doc), -1)
        except AlreadyExists:
            return False
        return True

    async def put(self, path: str, doc: Doc) -> None:
        await self.store.put(path, _dump(doc))

    async def update(self, path: str, fn: Callable[[Doc], Doc]) -> Doc:
        """Apply ``fn`` to the current document and write it back with CAS.

        Raises NotFound if the node does not exist.
        """
        for _ in range(self.max_attempts):
            res = await self.store.get(path)
            if res is None:
                raise NotFound(path)
            doc = fn(json.loads(res.value) if res.value else {})
            try:
                await self.store.put(path, _dump(doc), res.stat.version)
            except BadVersion:
                continue
            return doc
        raise BadVersion(f"{path}: too many concurrent updates")

    async def delete(self, path: str) -> bool:
        try:
            await self.store.delete(path)
        except NotFound:
            return False
        return True

    async def children(self, path: str) -> list[str]:
        return await self.store.children(path)


def _dump(doc: Doc) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=False).encode()
