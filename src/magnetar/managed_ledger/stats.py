"""Internal stats in Pulsar's field names (``/internalStats``, PersistentTopicInternalStats).

Pure formatting of a managed ledger's and its cursors' state; no I/O.  Times
are rendered as ISO-8601 UTC strings as recent Pulsar versions do.  A cursor's
``individuallyDeletedMessages`` lists at most the first 10,000 ranges (the
count is in ``totalNonContiguousDeletedMessagesRange``).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magnetar.managed_ledger.cursor import ManagedCursorImpl
    from magnetar.managed_ledger.ledger import ManagedLedgerImpl


STATS_RANGES_MAX = 10_000


def iso_ms(ms: int) -> str | None:
    if ms <= 0:
        return None
    dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def ledger_internal_stats(ml: ManagedLedgerImpl) -> dict:
    ll = ml.ledger_list
    ledgers = []
    for li in ll.infos():
        is_current = li.ledger_id == ll.current_id
        ledgers.append(
            {
                "ledgerId": li.ledger_id,
                "entries": 0 if is_current else li.entries,
                "size": 0 if is_current else li.size_bytes,
                "offloaded": li.offloaded,
                "underReplicated": False,
                **({"offloadContext": li.offload_context.to_json()} if li.offload_context else {}),
            }
        )
    return {
        "entriesAddedCounter": ml.entries_added,
        "numberOfEntries": ll.total_entries(),
        "totalSize": ll.total_size(),
        "currentLedgerEntries": ll.current_entries,
        "currentLedgerSize": ll.current_size,
        "lastLedgerCreatedTimestamp": iso_ms(ml.last_ledger_created_ms),
        "lastLedgerCreationFailureTimestamp": iso_ms(ml.last_ledger_creation_failure_ms),
        "waitingCursorsCount": len(ml._waiters),
        "pendingAddEntriesCount": ml._inflight + len(ml._queue) + ml._unstarted,
        "lastConfirmedEntry": str(ll.last_confirmed),
        "state": ml.state.value,
        "ledgers": ledgers,
        "cursors": {name: c.stats() for name, c in ml.cursors.items()},
        "schemaLedgers": [],
        "compactedLedger": {
            "ledgerId": -1,
            "entries": -1,
            "size": -1,
            "offloaded": False,
            "underReplicated": False,
        },
    }


def cursor_stats(c: ManagedCursorImpl) -> dict:
    ll = c.ml.ledger_list
    store = c.store
    read = c.read_position
    return {
        "markDeletePosition": str(c.mark_delete_position),
        "readPosition": str(read),
        "waitingReadOp": False,
        "pendingReadOps": 0,
        "messagesConsumedCounter": c.messages_consumed,
        "cursorLedger": store.cursor_ledger_id if store is not None else -1,
        "cursorLedgerLastEntry": store.last_entry_id if store is not None else -1,
        # Bounded like the persisted state: a cursor with a million holes would otherwise
        # produce a ~30 MB string; totalNonContiguousDeletedMessagesRange has the real count.
        "individuallyDeletedMessages": c.acked.to_string(STATS_RANGES_MAX),
        "lastLedgerSwitchTimestamp": iso_ms(c.ml.last_ledger_created_ms),
        "state": c.state.value,
        "active": c.durable,
        "numberOfEntriesSinceFirstNotAckedMessage": ll.count_between(
            c.mark_delete_position, ll.previous(read)
        )
        + 1,
        "totalNonContiguousDeletedMessagesRange": len(c.acked),
        "subscriptionHavePendingRead": False,
        "subscriptionHavePendingReplayRead": False,
        "properties": dict(c.properties),
    }
