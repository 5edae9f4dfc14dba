"""Auto-recovery as one service: an auditor candidate plus a replication worker.

Theory of operation: BookKeeper runs auto-recovery either inside each bookie
or as separate processes; either way every instance is an auditor candidate
(only the elected one audits) and a replication worker (all of them repair,
one ledger each at a time, coordinated by ledger locks).  This class wires
both to one :class:`~magnetar.bookkeeper.client.BookKeeperClient`'s context
and one metadata session; ``aclose`` stops both.
"""

from __future__ import annotations

from magnetar.bookkeeper.auditor import Auditor
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.replication_worker import ReplicationWorker
from magnetar.metadata.api import MetadataStore


class AutoRecovery:
    def __init__(self, client: BookKeeperClient, store: MetadataStore, instance_id: str) -> None:
        self.auditor = Auditor(client.ctx, store, instance_id)
        self.worker = ReplicationWorker(client.ctx, store, instance_id)

    async def start(self) -> None:
        await self.auditor.start()
        self.worker.start()

    async def aclose(self) -> None:
        await self.worker.aclose()
        await self.auditor.aclose()
