"""PendingAckHandle: a subscription's acknowledgements made inside transactions.

Theory of operation: an ACK carrying a transaction id does not touch the cursor.  The
positions are *held* for the transaction (``held``: position -> transaction; a cumulative
ack holds its position as ``cumulative``) and logged on the subscription's pending-ack log
(a :class:`~magnetar.broker.transaction.log.RecordLog`, managed ledger
``<topic>-<subscription>__transaction_pending_ack``, created on the first transactional ack).
The held positions leave the consumers' unacknowledged sets (they are no longer
redelivered) and dispatch skips them.

* Batch-index acks (one message of a batch entry) hold a bitmask of indexes per
  transaction (``batch``); conflicts are per index, commit ANDs the cursor's ack set (the
  entry is done when no index is left), abort redelivers the entry.
* Conflicts (Pulsar's rules): a position held by another transaction, or already
  acknowledged on the cursor, -> TransactionConflict; a second transaction's cumulative ack
  while one is pending -> TransactionConflict.  The memory is claimed *before* the log
  append, so two concurrent acks cannot both pass the check.
* Commit (:meth:`end`): the held positions are acknowledged on the cursor (durable when the
  call returns), then an ``end`` record is logged.  Abort: released, ``end`` logged, and the
  messages are redelivered.  A crash between the two leaves the transaction held after
  recovery; the coordinator, still COMMITTING/ABORTING, ends it again (idempotent).
* Recovery replays ``ack``/``end`` records; the log is trimmed up to the first record of
  the oldest transaction still held.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from magnetar.broker.transaction.errors import TransactionConflictError
from magnetar.broker.transaction.log import RecordLog
from magnetar.broker.transaction.model import TxnID
from magnetar.managed_ledger.api import ManagedCursor, ManagedLedgerError, ManagedLedgerFactory, Position

log = logging.getLogger(__name__)

TRIM_EVERY_RECORDS = 64


def pending_ack_log_name(topic_ml_name: str, subscription: str) -> str:
    return f"{topic_ml_name}-{subscription}__transaction_pending_ack"


class PendingAckHandle:
    def __init__(self, factory: ManagedLedgerFactory, log_name: str, cursor: ManagedCursor) -> None:
        self.factory = factory
        self.log_name = log_name
        self.cursor = cursor
        self.log: RecordLog | None = None
        self.held: dict[Position, TxnID] = {}
        self.by_txn: dict[TxnID, list[Position]] = {}
        self.cumulative: dict[TxnID, Position] = {}
        # batch-index acks: position -> {txn: bitmask of the indexes it acked}, and batch sizes
        self.batch: dict[Position, dict[TxnID, int]] = {}
        self.batch_size: dict[Position, int] = {}
        self.first_record: dict[TxnID, Position] = {}
        self.committed_count = 0
        self.aborted_count = 0
        self._trimmed_at = 0  # log.appended at the last trim

    # ------------------------------------------------------------ recovery
    @classmethod
    async def load(
        cls, factory: ManagedLedgerFactory, topic_ml_name: str, subscription: str, cursor: ManagedCursor
    ) -> PendingAckHandle:
        name = pending_ack_log_name(topic_ml_name, subscription)
        handle = cls(factory, name, cursor)
        if await factory.exists(name):
            handle.log, records = await RecordLog.open(factory, name)
            for pos, rec in records:
                handle._apply(pos, rec)
        return handle

    def _apply(self, pos: Position, rec: dict[str, Any]) -> None:
        txnid = TxnID(*rec["txn"])
        if rec["op"] == "ack":
            self.first_record.setdefault(txnid, pos)
            for lid, eid in rec["v"]:
                p = Position(lid, eid)
                if rec.get("cumulative"):
                    self.cumulative[txnid] = p
                else:
                    self.held[p] = txnid
                    self.by_txn.setdefault(txnid, []).append(p)
            for lid, eid, size, mask in rec.get("b", ()):
                p = Position(lid, eid)
                self.batch_size[p] = size
                masks = self.batch.setdefault(p, {})
                masks[txnid] = masks.get(txnid, 0) | mask
        elif rec["op"] == "end":
            self._release(txnid)

    # ------------------------------------------------------------ acks
    def holds(self, position: Position) -> bool:
        return position in self.held

    async def ack(
        self,
        txnid: TxnID,
        positions: Sequence[Position],
        cumulative: bool,
        batch: Sequence[tuple[Position, int, int]] = (),
    ) -> list[Position]:
        """Hold ``positions`` (whole entries) and ``batch`` items ``(position, acked-index
        bitmask, batch size)`` for ``txnid``; returns the whole positions newly held."""
        new: list[Position] = []
        new_batch = self._claim_batch(txnid, batch)
        md = self.cursor.mark_delete_position
        if cumulative:
            pos = positions[-1]
            other = next((t for t in self.cumulative if t != txnid), None)
            if other is not None:
                raise TransactionConflictError(f"Cumulative ack by {txnid} conflicts with pending {other}")
            if pos <= md:
                raise TransactionConflictError(f"{pos} is already acknowledged (mark-delete {md})")
            if txnid in self.cumulative and self.cumulative[txnid] >= pos:
                return []
            self.cumulative[txnid] = pos
            new = [pos]
        else:
            for pos in positions:
                owner = self.held.get(pos)
                if owner == txnid:
                    continue
                if owner is None and any(t != txnid for t in self.batch.get(pos, {})):
                    owner = next(t for t in self.batch[pos] if t != txnid)
                if owner is not None:
                    self._undo(txnid, new, new_batch)
                    raise TransactionConflictError(f"{pos} is held by transaction {owner}; {txnid} conflicts")
                if pos <= md or self.cursor.is_acknowledged(pos):
                    self._undo(txnid, new, new_batch)
                    raise TransactionConflictError(f"{pos} is already acknowledged; {txnid} conflicts")
                self.held[pos] = txnid
                self.by_txn.setdefault(txnid, []).append(pos)
                new.append(pos)
        if not new and not new_batch:
            return []
        try:
            if self.log is None:
                self.log, _ = await RecordLog.open(self.factory, self.log_name)
            rec_pos = await self.log.append(
                {
                    "op": "ack",
                    "txn": list(txnid),
                    "cumulative": cumulative,
                    "v": [[p.ledger_id, p.entry_id] for p in new],
                    "b": [[p.ledger_id, p.entry_id, self.batch_size[p], m] for p, m in new_batch],
                }
            )
        except BaseException:
            if cumulative:
                self.cumulative.pop(txnid, None)
            else:
                self._undo(txnid, new, new_batch)
            raise
        self.first_record.setdefault(txnid, rec_pos)
        return new

    def _claim_batch(
        self, txnid: TxnID, batch: Sequence[tuple[Position, int, int]]
    ) -> list[tuple[Position, int]]:
        """Claim batch indexes (conflict: another txn holds the entry or one of the indexes, or
        an index is acknowledged already); returns (position, newly claimed mask)."""
        claimed: list[tuple[Position, int]] = []
        md = self.cursor.mark_delete_position
        for pos, mask, size in batch:
            other = self.held.get(pos)
            masks = self.batch.get(pos, {})
            clash = next((t for t, m in masks.items() if t != txnid and m & mask), None)
            acked = _acked_on_cursor(self.cursor.get_ack_set(pos), size)
            if (other is not None and other != txnid) or clash is not None:
                self._undo(txnid, [], claimed)
                raise TransactionConflictError(
                    f"{pos} (batch) is held by {other or clash}; {txnid} conflicts"
                )
            if pos <= md or self.cursor.is_acknowledged(pos) or acked & mask:
                self._undo(txnid, [], claimed)
                raise TransactionConflictError(f"{pos} (batch) is already acknowledged; {txnid} conflicts")
            fresh = mask & ~masks.get(txnid, 0)
            if fresh:
                self.batch_size[pos] = size
                self.batch.setdefault(pos, {})[txnid] = masks.get(txnid, 0) | fresh
                claimed.append((pos, fresh))
        return claimed

    def _undo(self, txnid: TxnID, positions: list[Position], batch: list[tuple[Position, int]] = ()) -> None:
        for p in positions:
            self.held.pop(p, None)
            if p in self.by_txn.get(txnid, []):
                self.by_txn[txnid].remove(p)
        for p, m in batch:
            masks = self.batch.get(p, {})
            left = masks.get(txnid, 0) & ~m
            if left:
                masks[txnid] = left
            else:
                masks.pop(txnid, None)
            if not masks:
                self.batch.pop(p, None)
                self.batch_size.pop(p, None)

    def _batch_of(self, txnid: TxnID) -> list[tuple[Position, int]]:
        return [(p, masks[txnid]) for p, masks in self.batch.items() if txnid in masks]

    def _release(self, txnid: TxnID) -> tuple[list[Position], Position | None]:
        positions = self.by_txn.pop(txnid, [])
        for p in positions:
            if self.held.get(p) == txnid:
                del self.held[p]
        self._undo(txnid, [], self._batch_of(txnid))
        self.first_record.pop(txnid, None)
        return positions, self.cumulative.pop(txnid, None)

    # ------------------------------------------------------------ end
    async def end(self, txnid: TxnID, commit: bool) -> tuple[list[Position], list[Position]]:
        """Commit (acks become effective) or abort (released).  Returns (positions to
        redeliver -- abort --, entries now wholly acknowledged -- commit)."""
        positions = list(self.by_txn.get(txnid, []))
        batch = self._batch_of(txnid)
        cumulative = self.cumulative.get(txnid)
        if not positions and not batch and cumulative is None:
            return [], []
        completed: list[Position] = []
        if commit:
            for pos, mask in batch:
                left = ((1 << self.batch_size[pos]) - 1) & ~mask
                if left:
                    await self.cursor.ack_batch_indexes(pos, _words(left))
                if not left or self.cursor.is_acknowledged(pos):
                    completed.append(pos)
            if positions or completed:
                await self.cursor.delete(positions + completed)
            if cumulative is not None and cumulative > self.cursor.mark_delete_position:
                await self.cursor.mark_delete(cumulative)
            # Plain acks are persisted lazily (managedLedgerDefaultMarkDeleteRateLimit); a
            # committed transaction's must be durable before the commit is answered.
            await self.cursor.flush()
        if self.log is not None:
            await self.log.append({"op": "end", "txn": list(txnid), "commit": commit})
        self._release(txnid)
        if commit:
            self.committed_count += 1
        else:
            self.aborted_count += 1
        await self._trim()
        return ([], completed) if commit else (positions + [p for p, _ in batch], [])

    async def _trim(self) -> None:
        """Trim the log now and then (every ``TRIM_EVERY_RECORDS`` appends): each trim is a
        durable cursor write, too dear for every end."""
        if self.log is None or self.log.appended - self._trimmed_at < TRIM_EVERY_RECORDS:
            return
        self._trimmed_at = self.log.appended
        if self.log is None:
            return
        oldest = min(self.first_record.values(), default=None)
        upto = self.log.last_position if oldest is None else Position(oldest.ledger_id, oldest.entry_id - 1)
        try:
            await self.log.trim_to(upto)
        except ManagedLedgerError:  # the next trim tries again; anything else is a bug the caller sees
            log.warning("trimming %s failed", self.log_name, exc_info=True)

    async def close(self) -> None:
        if self.log is not None:
            await self.log.close()
            self.log = None

    async def delete(self) -> None:
        """The subscription is gone: its pending-ack log goes too (as Pulsar deletes it)."""
        await self.close()
        if await self.factory.exists(self.log_name):
            await self.factory.delete(self.log_name)

    def stats(self) -> dict[str, Any]:
        """Pulsar's TransactionPendingAckStats (plus what is held)."""
        return {
            "state": "Ready",
            "lowWaterMarks": {},
            "ongoingTxnSize": len(
                set(self.by_txn) | set(self.cumulative) | {t for m in self.batch.values() for t in m}
            ),
            "pendingAckPositions": len(self.held) + len(self.batch),
            "committedTxnCount": self.committed_count,
            "abortedTxnCount": self.aborted_count,
            "managedLedgerName": self.log_name if self.log is not None else None,
        }


def _words(bits: int) -> list[int]:
    """A bitset as Pulsar's ack_set: signed 64-bit words, least significant first."""
    out = []
    while bits:
        w = bits & ((1 << 64) - 1)
        out.append(w - (1 << 64) if w >= 1 << 63 else w)
        bits >>= 64
    return out


def bits_of(words: Sequence[int]) -> int:
    return sum((w & ((1 << 64) - 1)) << (64 * i) for i, w in enumerate(words))


def _acked_on_cursor(ack_set: Sequence[int] | None, size: int) -> int:
    """The indexes the cursor already has acknowledged in a partly acked batch entry."""
    if ack_set is None:
        return 0
    return ((1 << size) - 1) & ~bits_of(ack_set)
