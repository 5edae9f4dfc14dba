"""TransactionBuffer: a topic's transactional entries, invisible until their transaction commits.

Theory of operation: a transactional SEND is stored in the topic's own ledger like any
entry (its metadata carries the transaction id), but the topic's dispatchers never read
past the first entry of the oldest *open* transaction on the topic (``ongoing``, ordered
by first position: the max-read position is the entry before it).  So nothing of an open
transaction -- nor anything stored after it -- reaches a consumer; committed order is the
ledger's order.

* :meth:`append` registers the transaction *before* the add starts, at a lower bound of
  its position (the entry after the last confirmed one), and narrows it to the real
  position when the add completes: a dispatcher woken by the add never sees the entry
  before the buffer knows it is uncommitted.
* :meth:`end` waits for the transaction's adds in flight, writes a commit or abort marker
  into the topic (``protocol.txn_markers``), then forgets the transaction (abort: records
  it in ``aborted``, marker position as value) and wakes the dispatchers.  Ending an
  unknown transaction writes the marker too (Pulsar does; a repeated end is harmless).
* :meth:`filter_entries` (called by the dispatcher on each read) cuts the read at the
  max-read position (seeking the cursor back so the rest is read again later), drops
  markers and entries of aborted transactions (acknowledging them on the cursor, as
  Pulsar does) and entries a transaction's pending ack holds.

Snapshots: ``{"scan_from": first ongoing position (or the entry after the last one), "aborted":
[...]}`` at ``/transactions/buffer-snapshots/<managed ledger>`` in the metadata store,
written after ``snapshot_max_txn_count`` ends or ``snapshot_min_time_ms`` after the last
one, and on close.  Recovery loads the snapshot and scans the topic only from
``scan_from`` (markers end transactions, transactional entries open them), so a restart
does not rescan the topic.  Aborted ids whose markers lie in ledgers the topic no longer
has are dropped from the index.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from magnetar.broker.transaction.errors import InvalidTxnStatusError
from magnetar.broker.transaction.model import TxnID
from magnetar.broker.transaction.pending_ack import PendingAckHandle
from magnetar.managed_ledger.api import Entry, ManagedCursor, ManagedLedgerFactory, Position
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import peek_metadata
from magnetar.protocol.txn_markers import TXN_ABORT, TXN_MARKER_TYPES, marker_type, txn_marker, txn_of

if TYPE_CHECKING:
    from magnetar.broker.service.subscription import Subscription
    from magnetar.broker.service.topic import PersistentTopic
    from magnetar.broker.transaction.config import TransactionConfig

log = logging.getLogger(__name__)

SNAPSHOT_ROOT = "/transactions/buffer-snapshots"
SCAN_BATCH = 200
ENDED_REMEMBERED = 10_000
LAST_ID_WALK_MAX = 100  # recently ended ids: a late SEND for one is refused


def snapshot_path(ml_name: str) -> str:
    return f"{SNAPSHOT_ROOT}/{ml_name}"


class TransactionBuffer:
    def __init__(
        self,
        topic: PersistentTopic,
        store: MetadataStore,
        factory: ManagedLedgerFactory,
        config: TransactionConfig,
    ) -> None:
        self.topic = topic
        self.store = store
        self.factory = factory
        self.config = config
        self.ongoing: dict[TxnID, Position] = {}  # first entry (or its lower bound)
        self.aborted: dict[TxnID, Position] = {}  # abort marker position
        self._ended: dict[TxnID, bool] = {}  # recently ended -> committed?
        self._adds: dict[TxnID, set[asyncio.Future[Position]]] = {}
        self._real: dict[TxnID, Position] = {}  # first stored entry, once known
        self._ends_since_snapshot = 0
        self._last_snapshot_ms = 0
        self.committed_count = 0
        self.aborted_count = 0
        # False until the topic holds anything transactional (an entry, a marker, a snapshot):
        # until then dispatch skips the per-entry metadata check entirely.
        self.transactional = False
        self.recovered_from: Position | None = None
        self.scanned_on_recovery = 0

    # ------------------------------------------------------------ recovery
    @classmethod
    async def load(
        cls,
        topic: PersistentTopic,
        store: MetadataStore,
        factory: ManagedLedgerFactory,
        config: TransactionConfig,
    ) -> TransactionBuffer:
        buf = cls(topic, store, factory, config)
        await buf._recover()
        return buf

    async def _recover(self) -> None:
        ml = self.topic.ml
        ledgers = {i.ledger_id for i in ml.ledgers()}
        first_ledger = min(ledgers, default=ml.last_confirmed_entry.ledger_id)
        scan_from = Position(first_ledger, 0)
        got = await self.store.get(snapshot_path(ml.name))
        if got is not None:
            self.transactional = True  # a snapshot exists: markers may lie ahead of a cursor
            try:
                snap = json.loads(got.value)
                start = Position(*snap["scan_from"])
                if start <= ml.last_confirmed_entry.next() and (start.ledger_id in ledgers or not ledgers):
                    scan_from = start
                    for most, least, lid, eid in snap["aborted"]:
                        if lid in ledgers:
                            self.aborted[TxnID(most, least)] = Position(lid, eid)
                else:
                    log.info("transaction buffer snapshot of %s is stale: rescanning", self.topic.name)
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable transaction buffer snapshot for %s: rescanning", self.topic.name)
        self.recovered_from = scan_from
        pos = scan_from
        lac = ml.last_confirmed_entry
        while pos <= lac:
            entries = await ml.read_entries_from(pos, SCAN_BATCH)
            if not entries:
                break
            for entry in entries:
                self._observe(entry)
            self.scanned_on_recovery += len(entries)
            pos = entries[-1].position.next()

    def _observe(self, entry: Entry) -> None:
        try:
            meta = peek_metadata(entry.data)
        except CorruptPayload:
            return
        txn = txn_of(meta)
        if txn is None:
            return
        txnid = TxnID(*txn)
        self.transactional = True
        kind = marker_type(meta)
        if kind in TXN_MARKER_TYPES:
            self.ongoing.pop(txnid, None)
            self._ended[txnid] = kind != TXN_ABORT
            if kind == TXN_ABORT:
                self.aborted[txnid] = entry.position
        elif txnid not in self.ongoing and txnid not in self._ended:
            self.ongoing[txnid] = entry.position
            self._real[txnid] = entry.position

    async def load_pending_ack(self, subscription: str, cursor: ManagedCursor) -> PendingAckHandle:
        """The pending-ack handle of one of the topic's durable subscriptions (recovered)."""
        return await PendingAckHandle.load(self.factory, self.topic.ml.name, subscription, cursor)

    # ------------------------------------------------------------ append
    def append(
        self, txnid: TxnID, start_add: Callable[[], asyncio.Future[Position]]
    ) -> asyncio.Future[Position]:
        if txnid in self._ended or txnid in self.aborted:
            fut: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
            fut.set_exception(InvalidTxnStatusError(f"Transaction {txnid} has already ended"))
            return fut
        self.transactional = True
        if txnid not in self.ongoing:
            self.ongoing[txnid] = self.topic.ml.last_confirmed_entry.next()  # lower bound
        add = start_add()
        adds = self._adds.setdefault(txnid, set())
        adds.add(add)

        def done(f: asyncio.Future[Position]) -> None:
            adds.discard(f)
            if not adds and self._adds.get(txnid) is adds:
                del self._adds[txnid]
            if txnid not in self.ongoing:
                return  # ended meanwhile
            if f.cancelled() or f.exception() is not None:
                if txnid not in self._real and txnid not in self._adds:
                    del self.ongoing[txnid]  # nothing of it was stored
                return
            pos = f.result()
            real = self._real.get(txnid)
            if real is None or pos < real:
                self._real[txnid] = real = pos
            self.ongoing[txnid] = real

        add.add_done_callback(done)
        return add

    # ------------------------------------------------------------ end
    async def end(self, txnid: TxnID, commit: bool) -> None:
        if txnid in self._ended:
            return  # a repeated END_TXN_ON_PARTITION (coordinator recovery)
        adds = list(self._adds.get(txnid, ()))
        if adds:
            await asyncio.gather(*adds, return_exceptions=True)
        self.transactional = True
        marker = txn_marker(commit, txnid.most, txnid.least, 0, self.topic.clock.time_ms())
        pos = await self.topic.ml.add_entry(marker, num_messages=1)
        self.ongoing.pop(txnid, None)
        self._real.pop(txnid, None)
        self._remember_ended(txnid, commit)
        if commit:
            self.committed_count += 1
        else:
            self.aborted[txnid] = pos
            self.aborted_count += 1
        self._ends_since_snapshot += 1
        self.topic.notify_dispatchers()
        await self._maybe_snapshot()

    def _remember_ended(self, txnid: TxnID, commit: bool) -> None:
        self._ended[txnid] = commit
        while len(self._ended) > ENDED_REMEMBERED:
            del self._ended[next(iter(self._ended))]

    # ------------------------------------------------------------ dispatch
    def is_aborted(self, most: int, least: int) -> bool:
        return TxnID(most, least) in self.aborted

    def first_ongoing(self) -> Position | None:
        return min(self.ongoing.values(), default=None)

    def max_read_position(self) -> Position:
        first = self.first_ongoing()
        if first is None:
            return self.topic.ml.last_confirmed_entry
        return Position(first.ledger_id, first.entry_id - 1)

    async def last_dispatchable(self, pos: Position) -> Position:
        """GET_LAST_MESSAGE_ID's position: not past the max-read position, and stepping back over
        markers and aborted entries (at most ``LAST_ID_WALK_MAX`` of them), so a reader's
        has_message_available does not wait for an entry that is never delivered."""
        pos = min(pos, self.max_read_position())
        ml = self.topic.ml
        for _ in range(LAST_ID_WALK_MAX):
            if pos.entry_id < 0:
                earlier = [i for i in ml.ledgers() if i.ledger_id < pos.ledger_id and i.entries > 0]
                if not earlier:
                    return pos
                pos = Position(earlier[-1].ledger_id, earlier[-1].entries - 1)
            meta = peek_metadata((await ml.read_entry(pos)).data)
            txn = txn_of(meta)
            if not meta.HasField("marker_type") and (txn is None or TxnID(*txn) not in self.aborted):
                return pos
            pos = Position(pos.ledger_id, pos.entry_id - 1)
        return pos

    async def filter_entries(
        self, sub: Subscription, entries: list[Entry], *, replay: bool = False
    ) -> tuple[list[Entry], bool]:
        """(entries to deliver, blocked at the max-read position)."""
        held = sub.pending_ack
        if not self.transactional and (held is None or not held.held):
            return entries, False  # nothing transactional here: no per-entry check
        limit = None if replay else self.first_ongoing()
        out: list[Entry] = []
        ack: list[Position] = []
        blocked = False
        for entry in entries:
            pos = entry.position
            if limit is not None and pos >= limit:
                await sub.cursor.seek(pos)  # read it again once the transaction ended
                blocked = True
                break
            try:
                meta = peek_metadata(entry.data)
            except CorruptPayload:
                out.append(entry)
                continue
            if meta.HasField("marker_type"):
                ack.append(pos)
                continue
            txn = txn_of(meta)
            if txn is not None and TxnID(*txn) in self.aborted:
                ack.append(pos)
                continue
            if held is not None and held.holds(pos):
                continue
            out.append(entry)
        if ack:
            await sub.cursor.delete(ack)
        return out, blocked

    # ------------------------------------------------------------ snapshots
    async def _maybe_snapshot(self) -> None:
        now = self.topic.clock.time_ms()
        due = self._ends_since_snapshot >= self.config.snapshot_max_txn_count or (
            now - self._last_snapshot_ms >= self.config.snapshot_min_time_ms
        )
        if due and self._ends_since_snapshot:
            await self.take_snapshot()

    async def take_snapshot(self) -> None:
        first = self.first_ongoing()
        scan_from = first if first is not None else self.topic.ml.last_confirmed_entry.next()
        live = {i.ledger_id for i in self.topic.ml.ledgers()}
        for txnid in [t for t, p in self.aborted.items() if live and p.ledger_id not in live]:
            del self.aborted[txnid]  # its ledger was trimmed: nothing left to filter
        snap = {
            "scan_from": [scan_from.ledger_id, scan_from.entry_id],
            "aborted": [[t.most, t.least, p.ledger_id, p.entry_id] for t, p in self.aborted.items()],
        }
        try:
            await self.store.put(snapshot_path(self.topic.ml.name), json.dumps(snap).encode())
        except MetadataError:
            log.warning(
                "writing the transaction buffer snapshot of %s failed", self.topic.name, exc_info=True
            )
            return
        self._ends_since_snapshot = 0
        self._last_snapshot_ms = self.topic.clock.time_ms()

    async def close(self) -> None:
        if self._ends_since_snapshot:
            await self.take_snapshot()

    async def delete(self) -> None:
        try:
            await self.store.delete(snapshot_path(self.topic.ml.name))
        except MetadataError:
            pass

    def stats(self) -> dict[str, Any]:
        """Pulsar's TransactionBufferStats."""
        mrp = self.max_read_position()
        return {
            "state": "Ready",
            "maxReadPosition": f"{mrp.ledger_id}:{mrp.entry_id}",
            "lastSnapshotTimestamps": self._last_snapshot_ms,
            "ongoingTxnSize": len(self.ongoing),
            "abortTxnCount": self.aborted_count,
            "committedTxnCount": self.committed_count,
            "abortedTxnIndexSize": len(self.aborted),
            "recoveredFrom": str(self.recovered_from) if self.recovered_from else None,
            "entriesScannedOnRecovery": self.scanned_on_recovery,
        }
