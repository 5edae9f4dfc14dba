"""magnetar.broker.compaction -- topic compaction (latest message per key) and the compacted view.

Modules (each opens with its own theory of operation):

* ``compactor.py``      -- :class:`Compactor`, Pulsar's two-phase compaction into a compacted
                           ledger; the horizon lives in the durable cursor ``__compaction``
                           (mark-delete = horizon, property ``CompactedTopicLedger`` = ledger id).
* ``service.py``        -- :class:`CompactionService`: one run per topic, status, auto-compaction.
* ``compacted_view.py`` -- :class:`CompactedTopicReader`: what a read_compacted dispatcher reads.
* ``messages.py``       -- keys/deletes out of stored entries; batch re-encoding.
* ``framing.py``        -- compacted-ledger entry = 19-byte header (original position) + stored bytes.
* ``errors.py``         -- typed errors (BrokerError subclasses: ``server_error`` / ``http_status``).

The API for the broker and web owners
=====================================

Construct once per broker (composition root)::

    from magnetar.broker.compaction import Compactor, CompactorConfig, CompactionService

    compactor = Compactor(bookkeeper, clock, CompactorConfig(
        ensemble_size=E, write_quorum=Qw, ack_quorum=Qa,   # the managed ledger's settings
        retain_null_key=False))                            # topicCompactionRetainNullKey
    service = CompactionService(compactor, open_ledger, supervisor)
    # open_ledger: async (topic name) -> the topic's open ManagedLedger (the broker's topic's ml)
    ...
    await service.aclose()

REST (``/admin/v2/persistent/{t}/{ns}/{topic}/compaction``):

* ``PUT``  -> ``service.trigger(topic)`` then 204.  Raises :class:`CompactionAlreadyRunning`
  (``http_status`` 409, message "Compaction already in progress").  ``trigger`` returns the
  background task; ``await service.compact(topic)`` waits for the :class:`CompactionResult`.
* ``GET``  -> 200 ``service.status(topic)`` == ``{"status": "NOT_RUN"|"RUNNING"|"SUCCESS"|"ERROR",
  "lastError": ""}`` (Pulsar's LongRunningProcessStatus).

Automatic compaction (namespace policy ``compactionThreshold``, bytes, 0 = off), e.g. from the
broker's periodic topic check::

    service.maybe_auto_compact(topic, compaction_backlog_bytes(ml), threshold_bytes)

read_compacted consumers/readers (Exclusive/Failover subscriptions and readers): the dispatcher
builds one reader per subscription cursor and reads through it instead of the cursor::

    reader = CompactedTopicReader(ml, cursor, bookkeeper,
                                  start=Position.EARLIEST if initial position is Earliest else None)
    entries = await reader.read_entries_or_wait(max_entries)   # Entry(original position, stored bytes)
    await reader.seek(position) / reader.rewind()                # instead of cursor.seek / rewind
    await reader.close()

The entries' data are stored bytes as a client sent them (batches with compacted-out messages
re-encoded), to be sent behind a CommandMessage with the entry's position; acks go to the
cursor as usual.  Non-compacted subscriptions never see the compacted ledger.

Topic deletion: ``await compactor.delete_compaction_state(ml)`` before ``ml.delete()`` deletes
the compacted ledger (the ``__compaction`` cursor goes with the managed ledger).

Batches: ``CompactorConfig.batch_mode`` decides what happens to the messages of a batch that
compaction drops.  ``BatchMode.DROP`` (the default) removes them from the re-encoded batch, so
the surviving messages get new batch indexes.  ``BatchMode.MARK_COMPACTED_OUT`` is Pulsar's way:
they stay with ``compacted_out=true`` and an empty payload, and batch indexes do not change.  It
is not the default because the official C++-based client (pulsar-client 3.13) does not skip such
records: it delivers them as empty messages, which a TableView takes as deletes
(tests/unit/compaction/test_compacted_view_official_client.py shows it).
"""

from magnetar.broker.compaction.compacted_view import CompactedTopicReader
from magnetar.broker.compaction.compactor import (
    COMPACTED_TOPIC_LEDGER_PROPERTY,
    COMPACTION_SUBSCRIPTION,
    CompactionHorizon,
    CompactionResult,
    Compactor,
    CompactorConfig,
    read_horizon,
)
from magnetar.broker.compaction.errors import (
    CompactedLedgerCorrupt,
    CompactionAlreadyRunning,
    CompactionError,
    CompactionServiceClosed,
    CompactionTooManyKeys,
)
from magnetar.broker.compaction.messages import BatchMode
from magnetar.broker.compaction.service import CompactionService, CompactionStatus, compaction_backlog_bytes

__all__ = [
    "COMPACTED_TOPIC_LEDGER_PROPERTY",
    "COMPACTION_SUBSCRIPTION",
    "BatchMode",
    "CompactedLedgerCorrupt",
    "CompactedTopicReader",
    "CompactionAlreadyRunning",
    "CompactionError",
    "CompactionHorizon",
    "CompactionResult",
    "CompactionService",
    "CompactionServiceClosed",
    "CompactionStatus",
    "CompactionTooManyKeys",
    "Compactor",
    "CompactorConfig",
    "compaction_backlog_bytes",
    "read_horizon",
]
