"""TransactionCoordinator: one coordinator (one partition of transaction_coordinator_assign).

Theory of operation: the coordinator hands out transaction ids ``(tc_id, seq)`` and keeps,
per open or ending transaction, a :class:`TxnMeta` (state, timeout, the partitions it
produced to, the subscriptions it acknowledged on).  Every change is first appended to the
transaction log (:class:`~magnetar.broker.transaction.log.RecordLog`, managed ledger
``pulsar/system/persistent/__transaction_log_{tc_id}``) and applied in memory only once it
is durable, so replaying the log after a crash rebuilds exactly what clients were told.

Records: ``new`` (id, timeout, open time), ``partitions`` / ``subscriptions`` (added
participants), ``state`` (COMMITTING, ABORTING, TIMEOUT, COMMITTED, ABORTED).  A
transaction that reached COMMITTED/ABORTED is forgotten (Pulsar does the same: a later
END_TXN for it is TransactionNotFound); the log is trimmed up to the first record of the
oldest transaction still known, and the sequence survives trimming in the log cursor's
properties (``seq``).

Ending (:meth:`end`): OPEN -> COMMITTING/ABORTING (logged) -> every participant is told
(``Participants.end_partition`` / ``end_subscription``, concurrently; failures are retried
with back-off) -> COMMITTED/ABORTED (logged) -> forgotten.  A request for a transaction
already ending in the same direction waits for that end.  Timeouts: a task owned by the
coordinator checks the deadlines every ``timeout_check_interval_ms``; an OPEN transaction
past its deadline becomes TIMEOUT (logged) and is aborted.  Recovery re-arms deadlines
(wall-clock times are logged) and drives every COMMITTING/ABORTING/TIMEOUT transaction to
its end again -- participants treat a repeated end as done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.broker.transaction.errors import (
    InvalidTxnStatusError,
    TransactionCoordinatorNotFoundError,
    TransactionNotFoundError,
)
from magnetar.broker.transaction.log import RecordLog
from magnetar.broker.transaction.model import TxnID, TxnState, check_transition
from magnetar.managed_ledger.api import ManagedLedgerError, Position
from magnetar.runtime import Clock, TaskSupervisor, wait_for

log = logging.getLogger(__name__)

TRIM_EVERY_RECORDS = 64

END_RETRY_DELAYS_S = (0.1, 0.2, 0.5, 1.0, 2.0)
# pulsar_txn_execution_latency_le_* bucket bounds (ms, open to final state); each bucket counts its own range
EXECUTION_LATENCY_BUCKETS_MS = (
    10,
    20,
    50,
    100,
    500,
    1000,
    5000,
    15000,
    30000,
    60000,
    300000,
    1500000,
    3000000,
)
END_WAIT_S = 20.0  # how long END_TXN waits for the participants before answering an error


def log_name(tc_id: int) -> str:
    return f"pulsar/system/persistent/__transaction_log_{tc_id}"


class Participants(Protocol):
    """Where the end of a transaction goes (the broker's topics and subscriptions)."""

    async def end_partition(self, topic: str, txnid: TxnID, commit: bool) -> None: ...

    async def end_subscription(self, topic: str, subscription: str, txnid: TxnID, commit: bool) -> None: ...


@dataclass
class TxnMeta:
    txnid: TxnID
    state: TxnState
    opened_ms: int
    timeout_ms: int
    first_record: Position
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    ended: asyncio.Future[TxnState] | None = None  # set while ending

    @property
    def deadline_ms(self) -> int:
        return self.opened_ms + self.timeout_ms

    def to_json(self, now_ms: int) -> dict[str, Any]:
        """Pulsar's TransactionMetadata (admin transactionMetadata)."""
        acked: dict[str, dict[str, dict]] = {}
        for t, s in self.subscriptions:
            acked.setdefault(t, {})[s] = {}
        return {
            "txnId": str(self.txnid),
            "status": self.state.value,
            "openTimestamp": self.opened_ms,
            "timeoutAt": self.timeout_ms,
            "producedPartitions": {p: {} for p in self.partitions},
            "ackedPartitions": acked,
            "ageMs": now_ms - self.opened_ms,
        }


class TransactionCoordinator:
    def __init__(
        self,
        tc_id: int,
        txn_log: RecordLog,
        participants: Participants,
        clock: Clock,
        supervisor: TaskSupervisor,
        default_timeout_ms: int = 60_000,
        max_active: int = 0,
        check_interval_ms: int = 200,
    ) -> None:
        self.tc_id = tc_id
        self.log = txn_log
        self.participants = participants
        self.clock = clock
        self.supervisor = supervisor
        self.default_timeout_ms = default_timeout_ms
        self.max_active = max_active
        self.check_interval_s = max(0.01, check_interval_ms / 1000.0)
        self.txns: dict[TxnID, TxnMeta] = {}
        self.seq = -1
        self.closed = False
        self.counters = {"created": 0, "committed": 0, "aborted": 0, "timedOut": 0}
        self.execution_latency = [0] * (len(EXECUTION_LATENCY_BUCKETS_MS) + 1)  # the last: overflow
        self._tasks: set[asyncio.Task[Any]] = set()
        self._trimmed_at = 0  # log.appended at the last trim

    # ------------------------------------------------------------ recovery
    @classmethod
    async def recover(
        cls,
        tc_id: int,
        factory: Any,
        participants: Participants,
        clock: Clock,
        supervisor: TaskSupervisor,
        **kw: Any,
    ) -> TransactionCoordinator:
        txn_log, records = await RecordLog.open(factory, log_name(tc_id))
        tc = cls(tc_id, txn_log, participants, clock, supervisor, **kw)
        tc.seq = int(txn_log.properties.get("seq", -1))
        for pos, rec in records:
            tc._apply(pos, rec)
        for meta in list(tc.txns.values()):
            if meta.state.ending:
                tc._spawn_end(meta)
        tc._spawn(tc._timeout_loop(), f"txn-timeouts-{tc_id}")
        log.info("transaction coordinator %d recovered: %d transactions, seq %d", tc_id, len(tc.txns), tc.seq)
        return tc

    def _apply(self, pos: Position, rec: dict[str, Any]) -> None:
        txnid = TxnID(self.tc_id, int(rec["txn"]))
        op = rec["op"]
        if op == "new":
            self.seq = max(self.seq, txnid.least)
            self.txns[txnid] = TxnMeta(txnid, TxnState.OPEN, int(rec["opened"]), int(rec["timeout"]), pos)
            return
        meta = self.txns.get(txnid)
        if meta is None:
            return  # a record of a transaction already finished and forgotten
        if op == "partitions":
            meta.partitions.extend(p for p in rec["v"] if p not in meta.partitions)
        elif op == "subscriptions":
            for t, s in rec["v"]:
                if (t, s) not in meta.subscriptions:
                    meta.subscriptions.append((t, s))
        elif op == "state":
            meta.state = TxnState(rec["v"])
            if meta.state.final:
                del self.txns[txnid]

    # ------------------------------------------------------------ requests
    def _check_open(self) -> None:
        if self.closed:
            raise TransactionCoordinatorNotFoundError(f"Transaction coordinator {self.tc_id} is closed")

    def get(self, txnid: TxnID) -> TxnMeta:
        meta = self.txns.get(txnid)
        if meta is None or txnid.most != self.tc_id:
            raise TransactionNotFoundError(f"Transaction {txnid} not found on coordinator {self.tc_id}")
        return meta

    async def new_txn(self, timeout_ms: int) -> TxnID:
        self._check_open()
        if self.max_active and len(self.txns) >= self.max_active:
            raise InvalidTxnStatusError(
                f"Coordinator {self.tc_id} reached maxActiveTransactionsPerCoordinator"
            )
        self.seq += 1
        txnid = TxnID(self.tc_id, self.seq)
        timeout_ms = timeout_ms or self.default_timeout_ms
        now = self.clock.time_ms()
        pos = await self.log.append({"op": "new", "txn": txnid.least, "timeout": timeout_ms, "opened": now})
        self.txns[txnid] = TxnMeta(txnid, TxnState.OPEN, now, timeout_ms, pos)
        self.counters["created"] += 1
        return txnid

    async def add_partitions(self, txnid: TxnID, partitions: Iterable[str]) -> None:
        self._check_open()
        meta = self._open(txnid)
        new = [p for p in dict.fromkeys(partitions) if p not in meta.partitions]
        if new:
            await self.log.append({"op": "partitions", "txn": txnid.least, "v": new})
            meta.partitions.extend(p for p in new if p not in meta.partitions)

    async def add_subscriptions(self, txnid: TxnID, subscriptions: Iterable[tuple[str, str]]) -> None:
        self._check_open()
        meta = self._open(txnid)
        new = [list(ts) for ts in dict.fromkeys(subscriptions) if ts not in meta.subscriptions]
        if new:
            await self.log.append({"op": "subscriptions", "txn": txnid.least, "v": new})
            for t, s in new:
                if (t, s) not in meta.subscriptions:
                    meta.subscriptions.append((t, s))

    def _open(self, txnid: TxnID) -> TxnMeta:
        meta = self.get(txnid)
        if meta.state is not TxnState.OPEN:
            raise InvalidTxnStatusError(f"Transaction {txnid} is {meta.state.value}, not OPEN")
        return meta

    async def end(self, txnid: TxnID, commit: bool) -> TxnState:
        """Commit or abort; returns the final state once every participant has it."""
        self._check_open()
        meta = self.get(txnid)
        target = TxnState.COMMITTING if commit else TxnState.ABORTING
        if meta.state is TxnState.OPEN:
            await self._set_state(meta, target)
            self._spawn_end(meta)
        elif meta.state is not target and not (meta.state is TxnState.TIMEOUT and not commit):
            raise InvalidTxnStatusError(
                f"Transaction {txnid} is {meta.state.value}: cannot {'commit' if commit else 'abort'}"
            )
        assert meta.ended is not None
        try:
            return await wait_for(self.clock, asyncio.shield(meta.ended), END_WAIT_S)
        except TimeoutError:
            raise InvalidTxnStatusError(
                f"Transaction {txnid} is still {meta.state.value} (participants busy)"
            ) from None

    async def _set_state(self, meta: TxnMeta, new: TxnState) -> None:
        check_transition(meta.txnid, meta.state, new)
        await self.log.append({"op": "state", "txn": meta.txnid.least, "v": new.value})
        meta.state = new

    def _spawn_end(self, meta: TxnMeta) -> None:
        if meta.ended is None:
            meta.ended = asyncio.get_running_loop().create_future()
            self._spawn(self._drive_end(meta), f"txn-end-{meta.txnid}")

    async def _drive_end(self, meta: TxnMeta) -> None:
        commit = meta.state is TxnState.COMMITTING
        attempt = 0
        while not self.closed:
            try:
                await asyncio.gather(
                    *(self.participants.end_partition(p, meta.txnid, commit) for p in meta.partitions),
                    *(
                        self.participants.end_subscription(t, s, meta.txnid, commit)
                        for t, s in meta.subscriptions
                    ),
                )
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = END_RETRY_DELAYS_S[min(attempt, len(END_RETRY_DELAYS_S) - 1)]
                attempt += 1
                log.info(
                    "ending %s on its participants failed (%s); retrying in %.1fs", meta.txnid, exc, delay
                )
                await self.clock.sleep(delay)
        else:
            return
        final = TxnState.COMMITTED if commit else TxnState.ABORTED
        await self._set_state(meta, final)
        self.counters["committed" if commit else "aborted"] += 1
        self._count_latency(self.clock.time_ms() - meta.opened_ms)
        self.txns.pop(meta.txnid, None)
        assert meta.ended is not None
        if not meta.ended.done():
            meta.ended.set_result(final)
        await self._trim()

    async def _trim(self) -> None:
        """Trim the log now and then (every ``TRIM_EVERY_RECORDS`` appends): each trim is a
        durable cursor write, too dear for every end."""
        if self.log is None or self.log.appended - self._trimmed_at < TRIM_EVERY_RECORDS:
            return
        self._trimmed_at = self.log.appended
        oldest = min((m.first_record for m in self.txns.values()), default=None)
        upto = self.log.last_position if oldest is None else Position(oldest.ledger_id, oldest.entry_id - 1)
        try:
            await self.log.trim_to(upto, {"seq": self.seq})
        except ManagedLedgerError:  # the next trim tries again; anything else is a bug the caller sees
            log.warning("trimming the transaction log %d failed", self.tc_id, exc_info=True)

    def _count_latency(self, ms: int) -> None:
        i = next(
            (i for i, b in enumerate(EXECUTION_LATENCY_BUCKETS_MS) if ms <= b),
            len(EXECUTION_LATENCY_BUCKETS_MS),
        )
        self.execution_latency[i] += 1

    # ------------------------------------------------------------ timeouts
    async def _timeout_loop(self) -> None:
        while not self.closed:
            await self.clock.sleep(self.check_interval_s)
            now = self.clock.time_ms()
            for meta in [m for m in self.txns.values() if m.state is TxnState.OPEN and m.deadline_ms <= now]:
                try:
                    await self._set_state(meta, TxnState.TIMEOUT)
                except Exception:
                    log.warning("marking %s timed out failed", meta.txnid, exc_info=True)
                    continue
                self.counters["timedOut"] += 1
                self._spawn_end(meta)

    # ------------------------------------------------------------ lifecycle / stats
    def _spawn(self, coro: Any, name: str) -> None:
        task = self.supervisor.spawn(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        for meta in self.txns.values():
            if meta.ended is not None and not meta.ended.done():
                meta.ended.set_exception(TransactionCoordinatorNotFoundError("coordinator closed"))
                meta.ended.exception()
        await self.log.close()

    def stats(self) -> dict[str, Any]:
        """Pulsar's TransactionCoordinatorStats."""
        return {
            "state": "Closed" if self.closed else "Ready",
            "leastSigBits": self.seq,
            "lowWaterMark": min((m.txnid.least for m in self.txns.values()), default=self.seq),
            "ongoingTxnSize": len(self.txns),
            "recoverStartTime": 0,
            "recoverEndTime": 0,
            "createdCount": self.counters["created"],
            "committedCount": self.counters["committed"],
            "abortedCount": self.counters["aborted"],
            "timeoutCount": self.counters["timedOut"],
            "transactionLogStats": {"managedLedgerName": self.log.name, "managedLedgerInternalStats": None},
        }
