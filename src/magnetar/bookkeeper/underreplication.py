"""Under-replication marks in the metadata store.

Theory of operation: the auditor marks a ledger that has a fragment on a lost
bookie by creating ``UNDERREPLICATED_PATH/L<id>`` (JSON: the lost bookies
and when the mark was made).  A replication worker that wants to repair a
ledger first takes the lock ``UNDERREPLICATION_LOCKS_PATH/L<id>`` (an
ephemeral node, so a crashed worker's lock goes away with its session),
repairs, deletes the mark and releases the lock.  Marks are idempotent: a
ledger marked twice gets the union of the lost bookies.
"""

from __future__ import annotations

import json

from magnetar.bookie.api import UNDERREPLICATED_PATH, ledger_id_from_node
from magnetar.metadata.api import AlreadyExists, BadVersion, MetadataStore, NotFound

UNDERREPLICATION_ROOT = UNDERREPLICATED_PATH.rsplit("/", 1)[0]
UNDERREPLICATION_LOCKS_PATH = f"{UNDERREPLICATION_ROOT}/locks"
AUDITOR_ELECTION_PATH = f"{UNDERREPLICATION_ROOT}/auditorelection"


def mark_path(ledger_id: int) -> str:
    return f"{UNDERREPLICATED_PATH}/L{ledger_id:010d}"


def lock_path(ledger_id: int) -> str:
    return f"{UNDERREPLICATION_LOCKS_PATH}/L{ledger_id:010d}"


class UnderReplicationManager:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def mark(self, ledger_id: int, lost_bookies: list[str], now_ms: int, retries_max: int = 16) -> bool:
        """Mark (or extend the mark of) a ledger; True if something changed."""
        for _ in range(retries_max):
            got = await self._store.get(mark_path(ledger_id))
            if got is None:
                doc = {"lostBookies": sorted(lost_bookies), "ctime": now_ms}
                try:
                    await self._store.put(mark_path(ledger_id), json.dumps(doc).encode(), -1)
                except AlreadyExists:
                    continue
                return True
            doc = json.loads(got.value or b"{}")
            merged = sorted(set(doc.get("lostBookies", [])) | set(lost_bookies))
            if merged == doc.get("lostBookies"):
                return False
            doc["lostBookies"] = merged
            try:
                await self._store.put(mark_path(ledger_id), json.dumps(doc).encode(), got.stat.version)
            except BadVersion:
                continue
            return True
        return False

    async def unmark(self, ledger_id: int) -> None:
        try:
            await self._store.delete(mark_path(ledger_id))
        except NotFound:
            pass

    async def marked(self) -> list[int]:
        ids = (ledger_id_from_node(n) for n in await self._store.children(UNDERREPLICATED_PATH))
        return sorted(i for i in ids if i is not None)

    async def lost_bookies(self, ledger_id: int) -> list[str] | None:
        got = await self._store.get(mark_path(ledger_id))
        if got is None:
            return None
        return list(json.loads(got.value or b"{}").get("lostBookies", []))
