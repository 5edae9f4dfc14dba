"""The transaction parts on an in-memory storage stack (no broker, no sockets): the
coordinator's state machine, its log recovery after a crash, timeouts, and the pending-ack
rules.  A "crash" is a second managed-ledger factory opening the same logs while the first
was never closed (the new owner fences the old one, as after a broker restart).
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.transaction.config import TransactionConfig
from magnetar.broker.transaction.coordinator import TransactionCoordinator
from magnetar.broker.transaction.errors import (
    InvalidTxnStatusError,
    TransactionConflictError,
    TransactionNotFoundError,
)
from magnetar.broker.transaction.model import TxnID, TxnState
from magnetar.broker.transaction.pending_ack import PendingAckHandle
from magnetar.managed_ledger.api import InitialPosition
from magnetar.runtime import RealClock, TaskSupervisor
from magnetar.testing.ml_conformance import MemoryHarness


class Participants:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.fail = 0  # fail this many calls first

    async def end_partition(self, topic, txnid, commit) -> None:
        await self._call(("p", topic, txnid, commit))

    async def end_subscription(self, topic, sub, txnid, commit) -> None:
        await self._call(("s", topic, sub, txnid, commit))

    async def _call(self, what) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("participant unavailable")
        self.calls.append(what)


@pytest.fixture
async def harness():
    h = MemoryHarness()
    yield h
    await h.aclose()


async def _tc(harness, participants, tc_id=0, **kw) -> TransactionCoordinator:
    factory = await harness.new_factory()
    return await TransactionCoordinator.recover(
        tc_id, factory, participants, RealClock(), TaskSupervisor("test"), check_interval_ms=20, **kw
    )


async def _wait(pred, timeout_s=5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not pred():
        assert loop.time() < end, "condition not reached"
        await asyncio.sleep(0.01)


async def test_commit_tells_every_participant_then_forgets(harness):
    parts = Participants()
    tc = await _tc(harness, parts, tc_id=2)
    txn = await tc.new_txn(10_000)
    assert txn == TxnID(2, 0)
    await tc.add_partitions(txn, ["persistent://a/b/t1", "persistent://a/b/t1"])
    await tc.add_subscriptions(txn, [("persistent://a/b/in", "s")])
    assert await tc.end(txn, commit=True) is TxnState.COMMITTED
    assert sorted(parts.calls) == [
        ("p", "persistent://a/b/t1", txn, True),
        ("s", "persistent://a/b/in", "s", txn, True),
    ]
    with pytest.raises(TransactionNotFoundError):
        await tc.end(txn, commit=True)
    with pytest.raises(TransactionNotFoundError):
        await tc.add_partitions(TxnID(2, 99), ["x"])
    await tc.close()


async def test_no_changes_once_ending(harness):
    parts = Participants()
    parts.fail = 10_000  # the end never completes
    tc = await _tc(harness, parts)
    txn = await tc.new_txn(10_000)
    await tc.add_partitions(txn, ["t"])
    ending = asyncio.ensure_future(tc.end(txn, commit=False))
    await _wait(lambda: tc.txns[txn].state is TxnState.ABORTING)
    with pytest.raises(InvalidTxnStatusError):
        await tc.add_partitions(txn, ["u"])
    with pytest.raises(InvalidTxnStatusError):
        await tc.end(txn, commit=True)
    ending.cancel()
    await tc.close()


async def test_recovery_after_a_crash_restores_open_and_finishes_ending(harness):
    parts = Participants()
    tc = await _tc(harness, parts)
    open_txn = await tc.new_txn(60_000)
    await tc.add_partitions(open_txn, ["persistent://a/b/open"])
    done = await tc.new_txn(60_000)
    await tc.end(done, commit=False)
    committing = await tc.new_txn(60_000)
    await tc.add_subscriptions(committing, [("persistent://a/b/in", "s")])
    parts.fail = 10_000  # the participants are down: the commit stays COMMITTING
    task = asyncio.ensure_future(tc.end(committing, commit=True))
    await _wait(lambda: tc.txns[committing].state is TxnState.COMMITTING)
    # crash: the old coordinator is never closed; a new owner recovers from the log
    parts2 = Participants()
    tc2 = await _tc(harness, parts2)
    assert tc2.txns[open_txn].state is TxnState.OPEN
    assert tc2.txns[open_txn].partitions == ["persistent://a/b/open"]
    assert done not in tc2.txns
    await _wait(lambda: committing not in tc2.txns)  # driven to COMMITTED again
    assert ("s", "persistent://a/b/in", "s", committing, True) in parts2.calls
    assert (await tc2.new_txn(1000)).least > committing.least  # ids are never reused
    task.cancel()
    await tc2.close()


async def test_sequence_survives_a_fully_trimmed_log(harness):
    parts = Participants()
    tc = await _tc(harness, parts)
    start = tc.log.cursor.mark_delete_position
    for _ in range(70):  # > TRIM_EVERY_RECORDS records: the log is trimmed on the way
        await tc.end(await tc.new_txn(1000), commit=True)
    assert tc.log.cursor.mark_delete_position > start
    assert tc.log.cursor.properties["seq"] >= 20
    await tc.close()
    tc2 = await _tc(harness, parts)
    assert not tc2.txns
    assert (await tc2.new_txn(1000)).least == 70
    await tc2.close()


async def test_timeout_aborts(harness):
    parts = Participants()
    tc = await _tc(harness, parts)
    txn = await tc.new_txn(100)
    await tc.add_partitions(txn, ["t"])
    await _wait(lambda: txn not in tc.txns)
    assert parts.calls == [("p", "t", txn, False)]
    assert tc.stats()["timeoutCount"] == 1 and tc.stats()["abortedCount"] == 1
    await tc.close()


async def test_pending_ack_conflicts_commit_abort_and_recovery(harness):
    factory = await harness.new_factory()
    ml = await factory.open("t/ns/persistent/pa")
    cursor = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"m%d" % i) for i in range(6)]
    pa = await PendingAckHandle.load(factory, ml.name, "sub", cursor)
    t1, t2, t3 = TxnID(0, 1), TxnID(0, 2), TxnID(1, 1)
    assert await pa.ack(t1, [pos[0], pos[1]], cumulative=False) == [pos[0], pos[1]]
    assert await pa.ack(t1, [pos[1]], cumulative=False) == []  # the same txn again: fine
    with pytest.raises(TransactionConflictError):
        await pa.ack(t2, [pos[2], pos[1]], cumulative=False)
    assert not pa.holds(pos[2])  # the conflicting request claimed nothing
    await cursor.delete([pos[5]])
    with pytest.raises(TransactionConflictError):  # already acknowledged
        await pa.ack(t2, [pos[5]], cumulative=False)
    await pa.ack(t2, [pos[2]], cumulative=False)
    await pa.ack(t3, [pos[3]], cumulative=False)
    # crash: a new factory recovers the pending-ack log
    f2 = await harness.new_factory()
    ml2 = await f2.open("t/ns/persistent/pa")
    pa2 = await PendingAckHandle.load(f2, ml2.name, "sub", ml2.cursors["sub"])
    assert {p: t for p, t in pa2.held.items()} == {pos[0]: t1, pos[1]: t1, pos[2]: t2, pos[3]: t3}
    assert await pa2.end(t1, commit=True) == ([], [])
    assert ml2.cursors["sub"].is_acknowledged(pos[0]) and ml2.cursors["sub"].is_acknowledged(pos[1])
    assert await pa2.end(t2, commit=False) == ([pos[2]], [])
    assert not ml2.cursors["sub"].is_acknowledged(pos[2])
    assert await pa2.end(t2, commit=False) == ([], [])  # repeated end: nothing left
    assert pa2.held == {pos[3]: t3}
    await pa2.close()


def test_config_validation():
    from magnetar.broker.config import ConfigError

    cfg = TransactionConfig.from_properties(
        {"transactionCoordinatorEnabled": "true", "magnetarTransactionCoordinatorCount": "4"}
    )
    assert cfg.enabled and cfg.coordinator_count == 4
    assert not TransactionConfig.from_properties({}).enabled
    for bad in (
        {"transactionCoordinatorEnabled": "maybe"},
        {"magnetarTransactionCoordinatorCount": "0"},
        {"maxActiveTransactionsPerCoordinator": "-1"},
    ):
        with pytest.raises(ConfigError):
            TransactionConfig.from_properties(bad)


async def test_pending_ack_batch_indexes(harness):
    factory = await harness.new_factory()
    ml = await factory.open("t/ns/persistent/pab")
    cursor = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    pos = await ml.add_entry(b"batch-of-4", num_messages=4)
    pa = await PendingAckHandle.load(factory, ml.name, "sub", cursor)
    t1, t2, t3 = TxnID(0, 1), TxnID(0, 2), TxnID(0, 3)
    await pa.ack(t1, [], False, [(pos, 0b0001, 4)])
    await pa.ack(t2, [], False, [(pos, 0b0110, 4)])  # other indexes: no conflict
    with pytest.raises(TransactionConflictError):
        await pa.ack(t3, [], False, [(pos, 0b0100, 4)])  # index 2 is t2's
    with pytest.raises(TransactionConflictError):
        await pa.ack(t3, [pos], False)  # the whole entry overlaps both
    assert await pa.end(t1, commit=True) == ([], [])  # index 0 acknowledged, entry not complete
    assert not cursor.is_acknowledged(pos)
    with pytest.raises(TransactionConflictError):
        await pa.ack(t3, [], False, [(pos, 0b0001, 4)])  # index 0 is acknowledged now
    assert await pa.end(t2, commit=False) == ([pos], [])  # released: redeliver the entry
    # recovery keeps a held batch index
    await pa.ack(t3, [], False, [(pos, 0b1110, 4)])
    f2 = await harness.new_factory()
    ml2 = await f2.open("t/ns/persistent/pab")
    pa2 = await PendingAckHandle.load(f2, ml2.name, "sub", ml2.cursors["sub"])
    assert pa2.batch == {pos: {t3: 0b1110}}
    assert await pa2.end(t3, commit=True) == ([], [pos])  # the last indexes: the entry is done
    assert ml2.cursors["sub"].is_acknowledged(pos)
