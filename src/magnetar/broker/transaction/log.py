"""RecordLog: JSON records on a managed ledger -- the transaction log and the pending-ack log.

Theory of operation: each record is one entry (compact JSON) appended with
``ManagedLedger.add_entry``; an append returns once the entry is durable (the managed
ledger's own guarantee).  Opening replays every record after the cursor ``__log``'s
mark-delete position, in order.  The owner trims with :meth:`trim_to`: everything up to a
position is no longer needed (mark-delete of the cursor; the managed ledger deletes whole
ledgers below the slowest cursor on its own schedule).  Small integers that must outlive
trimmed records (the coordinator's sequence) travel in the cursor's properties.

One writer per log: the coordinator, or the subscription's pending-ack handle, owns it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from magnetar.managed_ledger.api import (
    InitialPosition,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    Position,
)

log = logging.getLogger(__name__)

CURSOR_NAME = "__log"
REPLAY_BATCH = 500


class RecordLog:
    def __init__(self, name: str, ml: ManagedLedger, cursor: ManagedCursor) -> None:
        self.name = name
        self.ml = ml
        self.cursor = cursor
        self.appended = 0

    @classmethod
    async def open(
        cls, factory: ManagedLedgerFactory, name: str, config: ManagedLedgerConfig | None = None
    ) -> tuple[RecordLog, list[tuple[Position, dict[str, Any]]]]:
        """Open (creating) the log and return it with the records still in it, oldest first."""
        ml = await factory.open(name, config)
        cursor = await ml.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)
        out: list[tuple[Position, dict[str, Any]]] = []
        pos = cursor.mark_delete_position.next()
        while pos <= ml.last_confirmed_entry:
            entries = await ml.read_entries_from(pos, REPLAY_BATCH)
            if not entries:
                break
            for entry in entries:
                try:
                    out.append((entry.position, json.loads(entry.data)))
                except ValueError:
                    log.error("log %s: unreadable record at %s skipped", name, entry.position)
            pos = entries[-1].position.next()
        return cls(name, ml, cursor), out

    @property
    def properties(self) -> Mapping[str, int]:
        return self.cursor.properties

    async def append(self, record: Mapping[str, Any]) -> Position:
        data = json.dumps(record, separators=(",", ":")).encode()
        pos = await self.ml.add_entry(data)
        self.appended += 1
        return pos

    async def trim_to(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        """Records at or before ``position`` are not needed any more."""
        if position > self.ml.last_confirmed_entry:
            position = self.ml.last_confirmed_entry
        if position > self.cursor.mark_delete_position or properties is not None:
            await self.cursor.mark_delete(max(position, self.cursor.mark_delete_position), properties)

    @property
    def last_position(self) -> Position:
        return self.ml.last_confirmed_entry

    async def close(self) -> None:
        try:
            await self.cursor.close()
        finally:
            await self.ml.close()
