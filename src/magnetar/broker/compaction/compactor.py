"""The two-phase compactor: latest message per key into a new compacted ledger.

Theory of operation (as Pulsar's TwoPhaseCompactor)
---------------------------------------------------
State lives in the topic's durable cursor ``__compaction``:

* its mark-delete position is the *compaction horizon*: every message at or
  before it is represented by the compacted ledger;
* its property ``CompactedTopicLedger`` is the id of that compacted ledger
  (BookKeeper ledger of framed entries, see :mod:`.framing`);
* ``CompactionPendingLedger`` (Magnetar's own) names the ledger a run is
  writing, so a run interrupted by a crash leaves a record of its orphan.

A run reads its *sources* -- the previous compacted ledger (if any), then the
topic from ``horizon + 1`` to the last entry confirmed when the run started
(``end``) -- twice:

1. phase one parses every message (per message inside batches) and builds
   ``key -> (ledger, entry, batch index)`` of its latest occurrence; a
   delete (empty payload / ``null_value``) removes the key;
2. phase two creates a new ledger, records it as pending, and re-reads the
   sources writing each message that is still the latest for its key
   (batches re-encoded, see :mod:`.messages`), each framed with its original
   position.  Then the ledger is closed, and one mark-delete of
   ``__compaction`` to ``end`` with ``{"CompactedTopicLedger": new}`` switches
   readers to the new state atomically; only after that is the previous
   compacted ledger deleted.

Crash safety: until that mark-delete the old horizon and old ledger are
untouched, so an interrupted run (error, cancellation, broker restart) leaves
the previous compacted view valid.  A failed run deletes its ledger at once; a
cancelled or crashed one leaves it recorded as pending, and the next run
deletes it before it starts.  The old ledger's deletion failing after the
switch only leaks that ledger (logged).

Limits: the key map is bounded by ``max_keys``; reads go ``read_batch_entries``
at a time; at most ``max_pending_adds`` adds are in flight.  Messages without
a key are dropped unless ``retain_null_key`` (Pulsar's
``topicCompactionRetainNullKey``, default false); server markers always are.
Chunked messages are not reassembled: each chunk is treated as a message of
its own (as Pulsar's compactor does not support them either).

Transactions: when the topic has a transaction buffer (``txn_view_of(ml)``), a run
compacts only up to its max-read position (never past the first entry of an open
transaction, so the horizon never covers an uncommitted message) and skips the entries
of aborted transactions; commit/abort markers are dropped like every server marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.bookkeeper.api import BKError, BookKeeper, DigestType, NoSuchLedgerError
from magnetar.broker.compaction.errors import CompactionError, CompactionTooManyKeys
from magnetar.broker.compaction.framing import decode_compacted_entry, encode_compacted_entry
from magnetar.broker.compaction.messages import BatchMode, ParsedEntry, parse_entry, rewrite_entry
from magnetar.managed_ledger.api import (
    InitialPosition,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerError,
    Position,
)
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import peek_metadata
from magnetar.protocol.txn_markers import txn_of
from magnetar.runtime import Clock

log = logging.getLogger(__name__)

COMPACTION_SUBSCRIPTION = "__compaction"
COMPACTED_TOPIC_LEDGER_PROPERTY = "CompactedTopicLedger"
PENDING_LEDGER_PROPERTY = "CompactionPendingLedger"


class TxnView(Protocol):
    """What the compactor needs of a topic's transaction buffer."""

    def max_read_position(self) -> Position: ...
    def is_aborted(self, most: int, least: int) -> bool: ...


@dataclass(frozen=True)
class CompactorConfig:
    read_batch_entries: int = 100
    max_pending_adds: int = 100
    max_keys: int = 5_000_000
    retain_null_key: bool = False  # Pulsar's topicCompactionRetainNullKey
    # DROP by default: the official C++-based client (pulsar-client 3.13) does not skip records
    # marked compacted_out, it delivers them as empty messages (tests/unit/compaction/
    # test_compacted_view_official_client.py shows it); Pulsar's own way is MARK_COMPACTED_OUT.
    batch_mode: BatchMode = BatchMode.DROP
    # The compacted ledger's replication (Pulsar uses the managed ledger's settings).
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    password: bytes = b""


@dataclass(frozen=True)
class CompactionHorizon:
    """What readers need: everything <= ``position`` is in compacted ledger ``ledger_id``."""

    position: Position
    ledger_id: int


@dataclass
class CompactionResult:
    horizon: CompactionHorizon | None
    entries_read: int = 0
    messages_read: int = 0
    keys: int = 0
    entries_written: int = 0
    messages_kept: int = 0
    corrupt_entries: int = 0
    elapsed_s: float = 0.0
    deleted_ledgers: list[int] = field(default_factory=list)


def read_horizon(ml: ManagedLedger) -> CompactionHorizon | None:
    """The current horizon from the ``__compaction`` cursor, or None if never compacted."""
    cursor = ml.cursors.get(COMPACTION_SUBSCRIPTION)
    if cursor is None:
        return None
    ledger_id = cursor.properties.get(COMPACTED_TOPIC_LEDGER_PROPERTY)
    if ledger_id is None:
        return None
    return CompactionHorizon(cursor.mark_delete_position, int(ledger_id))


class Compactor:
    def __init__(
        self,
        bookkeeper: BookKeeper,
        clock: Clock,
        config: CompactorConfig | None = None,
        txn_view_of: Callable[[ManagedLedger], TxnView | None] | None = None,
    ) -> None:
        self._bk = bookkeeper
        self._clock = clock
        self.config = config or CompactorConfig()
        self._txn_view_of = txn_view_of or (lambda _ml: None)

    # -- the run ----------------------------------------------------------------------------

    async def compact(self, ml: ManagedLedger) -> CompactionResult:
        """One full compaction of ``ml``; raises CompactionError (old state kept) on failure."""
        t0 = self._clock.monotonic()
        try:
            result = await self._compact(ml)
        except (ManagedLedgerError, BKError) as e:
            raise CompactionError(f"compaction of {ml.name} failed: {e!r}") from e
        result.elapsed_s = self._clock.monotonic() - t0
        return result

    async def _compact(self, ml: ManagedLedger) -> CompactionResult:
        cursor = await ml.open_cursor(COMPACTION_SUBSCRIPTION, InitialPosition.EARLIEST)
        result = CompactionResult(horizon=None)
        await self._delete_orphan(cursor, result)
        props = dict(cursor.properties)
        old_ledger = props.get(COMPACTED_TOPIC_LEDGER_PROPERTY)
        start = cursor.mark_delete_position.next()
        end = ml.last_confirmed_entry
        txn = self._txn_view_of(ml)
        if txn is not None:
            end = min(end, txn.max_read_position())  # never past an open transaction
        if old_ledger is not None:
            result.horizon = CompactionHorizon(cursor.mark_delete_position, int(old_ledger))
        if end < start:
            return result  # nothing new since the horizon
        latest = await self._phase_one(ml, old_ledger, start, end, result, txn)
        new_ledger = await self._phase_two(ml, cursor, old_ledger, start, end, latest, result, txn)
        await cursor.mark_delete(end, {COMPACTED_TOPIC_LEDGER_PROPERTY: new_ledger})
        await cursor.flush()
        result.horizon = CompactionHorizon(end, new_ledger)
        if old_ledger is not None and old_ledger != new_ledger:
            await self._delete_quietly(int(old_ledger), result)
        return result

    async def _phase_one(
        self,
        ml: ManagedLedger,
        old_ledger: int | None,
        start: Position,
        end: Position,
        result: CompactionResult,
        txn: TxnView | None = None,
    ) -> dict[str, tuple[int, int, int]]:
        latest: dict[str, tuple[int, int, int]] = {}
        max_keys = self.config.max_keys
        async for pos, stored in self._sources(ml, old_ledger, start, end, txn):
            parsed = parse_entry(stored)
            result.entries_read += 1
            result.messages_read += len(parsed.messages)
            result.corrupt_entries += parsed.corrupt
            for m in parsed.messages:
                if m.key is None:
                    continue
                if m.is_delete:
                    latest.pop(m.key, None)
                    continue
                latest[m.key] = (pos.ledger_id, pos.entry_id, m.batch_index)
                if len(latest) > max_keys:
                    raise CompactionTooManyKeys(f"{ml.name}: more than {max_keys} keys to compact")
        result.keys = len(latest)
        return latest

    async def _phase_two(
        self,
        ml: ManagedLedger,
        cursor: ManagedCursor,
        old_ledger: int | None,
        start: Position,
        end: Position,
        latest: dict[str, tuple[int, int, int]],
        result: CompactionResult,
        txn: TxnView | None = None,
    ) -> int:
        cfg = self.config
        handle = await self._bk.create_ledger(
            cfg.ensemble_size,
            cfg.write_quorum,
            cfg.ack_quorum,
            digest_type=DigestType.CRC32C,
            password=cfg.password,
            custom_metadata={"compactedTopic": ml.name.encode(), "compactedTo": str(end).encode()},
        )
        ledger_id = handle.ledger_id
        await cursor.mark_delete(
            cursor.mark_delete_position, {**cursor.properties, PENDING_LEDGER_PROPERTY: ledger_id}
        )
        await cursor.flush()
        try:
            pending: list[bytes] = []
            async for pos, stored in self._sources(ml, old_ledger, start, end, txn):
                parsed = parse_entry(stored)
                out = rewrite_entry(parsed, self._keeper(pos, parsed, latest), cfg.batch_mode)
                if out is None:
                    continue
                pending.append(encode_compacted_entry(pos, out))
                if len(pending) >= cfg.max_pending_adds:
                    await self._add_all(handle, pending, result)
                    pending = []
            await self._add_all(handle, pending, result)
            await handle.close()
        except asyncio.CancelledError:
            raise  # as a crash would: the pending ledger is deleted by the next run
        except BaseException:
            await self._abandon(cursor, handle, ledger_id)
            raise
        return ledger_id

    def _keeper(self, pos: Position, parsed: ParsedEntry, latest: dict[str, tuple[int, int, int]]):  # noqa: ANN202
        """``keep(batch_index)`` for the messages of one entry read in phase two."""
        by_index = {m.batch_index: m for m in parsed.messages}
        retain_null_key = self.config.retain_null_key and not parsed.corrupt

        def keep(batch_index: int) -> bool:
            msg = by_index[batch_index]
            if msg.key is None:
                return retain_null_key
            return not msg.is_delete and latest.get(msg.key) == (pos.ledger_id, pos.entry_id, batch_index)

        return keep

    async def _add_all(self, handle, entries: list[bytes], result: CompactionResult) -> None:  # noqa: ANN001
        if not entries:
            return
        first = handle.last_add_pushed + 1
        ids = await asyncio.gather(*(handle.add_entry(e) for e in entries))
        if ids != list(range(first, first + len(entries))):
            raise CompactionError(
                f"compacted ledger {handle.ledger_id}: adds completed out of order {ids[:5]}"
            )
        result.entries_written += len(entries)

    # -- sources ----------------------------------------------------------------------------

    async def _sources(
        self,
        ml: ManagedLedger,
        old_ledger: int | None,
        start: Position,
        end: Position,
        txn: TxnView | None = None,
    ) -> AsyncIterator[tuple[Position, bytes]]:
        if old_ledger is not None:
            async for item in self._compacted_entries(int(old_ledger)):
                yield item
        batch = self.config.read_batch_entries
        pos = start
        while True:
            entries = await ml.read_entries_from(pos, batch)
            for e in entries:
                if e.position > end:
                    return
                if txn is not None and _aborted(txn, e.data):
                    continue
                yield e.position, e.data
            if not entries or entries[-1].position >= end:
                return
            pos = entries[-1].position.next()

    async def _compacted_entries(self, ledger_id: int) -> AsyncIterator[tuple[Position, bytes]]:
        handle = await self._bk.open_ledger(ledger_id, password=self.config.password, recovery=False)
        try:
            last = handle.last_add_confirmed
            batch = self.config.read_batch_entries
            for first in range(0, last + 1, batch):
                for e in await handle.read(first, min(last, first + batch - 1)):
                    yield decode_compacted_entry(e.data)
        finally:
            await handle.close()

    # -- ledgers left behind ----------------------------------------------------------------

    async def _delete_orphan(self, cursor: ManagedCursor, result: CompactionResult) -> None:
        props = dict(cursor.properties)
        orphan = props.pop(PENDING_LEDGER_PROPERTY, None)
        if orphan is None:
            return
        if orphan != props.get(COMPACTED_TOPIC_LEDGER_PROPERTY):
            await self._bk.delete_ledger(int(orphan))
            result.deleted_ledgers.append(int(orphan))
        await cursor.mark_delete(cursor.mark_delete_position, props)
        await cursor.flush()

    async def _abandon(self, cursor: ManagedCursor, handle, ledger_id: int) -> None:  # noqa: ANN001
        """A failed run: drop its ledger now and its pending record (best effort)."""
        try:
            await handle.close()
        except BKError:
            pass
        try:
            await self._bk.delete_ledger(ledger_id)
            props = dict(cursor.properties)
            if props.pop(PENDING_LEDGER_PROPERTY, None) == ledger_id:
                await cursor.mark_delete(cursor.mark_delete_position, props)
        except (BKError, ManagedLedgerError) as e:
            log.warning("compaction: could not drop abandoned ledger %s: %r", ledger_id, e)

    async def _delete_quietly(self, ledger_id: int, result: CompactionResult) -> None:
        try:
            await self._bk.delete_ledger(ledger_id)
            result.deleted_ledgers.append(ledger_id)
        except NoSuchLedgerError:
            pass
        except BKError as e:
            log.warning("compaction: previous compacted ledger %s not deleted: %r", ledger_id, e)

    async def delete_compaction_state(self, ml: ManagedLedger) -> list[int]:
        """Delete the compacted (and any pending) ledger of ``ml``: call before deleting a topic."""
        cursor = ml.cursors.get(COMPACTION_SUBSCRIPTION)
        if cursor is None:
            return []
        deleted = []
        props = cursor.properties
        for key in (COMPACTED_TOPIC_LEDGER_PROPERTY, PENDING_LEDGER_PROPERTY):
            lid = props.get(key)
            if lid is not None:
                try:
                    await self._bk.delete_ledger(int(lid))
                except BKError as e:
                    raise CompactionError(f"cannot delete compacted ledger {lid}: {e!r}") from e
                deleted.append(int(lid))
        return deleted


def _aborted(txn: TxnView, stored: bytes) -> bool:
    """Whether the entry belongs to an aborted transaction (never part of the compacted view)."""
    try:
        ids = txn_of(peek_metadata(stored))
    except CorruptPayload:  # unparseable: parse_entry counts it as corrupt
        return False
    return ids is not None and txn.is_aborted(*ids)
