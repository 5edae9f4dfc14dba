"""Seeded random runs: adds, acks, scripted BookKeeper failures, fencing, crashes and restarts.

Invariants checked throughout (the simulator's list): every acknowledged add is in the log
exactly once and in order, nothing else is; positions only grow; mark-delete never moves
back; an acknowledged entry stays acknowledged across restarts, an unacknowledged one stays
unacknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from magnetar.bookkeeper.api import LedgerFencedError
from magnetar.managed_ledger.api import (
    InitialPosition,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    Position,
)
from magnetar.testing.ml_conformance import MemoryHarness, small_config

NAME = "t/ns/d/random"


async def _log(ml) -> list[tuple[Position, bytes]]:
    c = await ml.new_non_durable_cursor(Position.EARLIEST)  # type: ignore[attr-defined]
    out = []
    while batch := await c.read_entries(100):
        out += [(e.position, e.data) for e in batch]
    return out


async def _open(h: MemoryHarness, f):  # noqa: ANN001, ANN202
    """Open, retrying while scripted create failures are pending (open needs a new ledger)."""
    errors = []
    for _ in range(8):
        try:
            return await f.open(NAME)
        except ManagedLedgerError as e:
            errors.append(repr(e))
    raise AssertionError(f"could not open: {errors}")


async def _run(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    h = MemoryHarness()
    cfg = small_config(max_entries_per_ledger=rng.choice([3, 7, 20]))
    try:
        f = await h.new_factory(cfg)
        ml = await f.open(NAME)
        cur = await ml.open_cursor("s", InitialPosition.EARLIEST)
        written: list[tuple[Position, bytes]] = []
        acked: set[Position] = set()
        uncertain: set[Position] = set()  # acked in memory, persisting failed (fenced): either way
        md = md_durable = cur.mark_delete_position
        counter = 0
        for _step in range(steps):
            op = rng.random()
            if op < 0.45:  # a pipelined burst of adds, maybe with a scripted failure in it
                n = rng.randint(1, 12)
                if rng.random() < 0.2:
                    h.bk.faults.fail_add(rng.randint(1, n))
                if rng.random() < 0.3:
                    h.bk.faults.hold_adds()
                datas = [b"d%06d" % (counter + i) for i in range(n)]
                counter += n
                tasks = [asyncio.ensure_future(ml.add_entry(d)) for d in datas]
                await asyncio.sleep(0)
                h.bk.faults.release_adds()
                results = await asyncio.gather(*tasks, return_exceptions=True)
                for d, r in zip(datas, results, strict=True):
                    if isinstance(r, Position):
                        assert not written or r > written[-1][0], "positions grow in call order"
                        written.append((r, d))
                    else:
                        assert isinstance(r, ManagedLedgerError), r
            elif op < 0.65 and written:  # individual acks
                picks = rng.sample(written, min(len(written), rng.randint(1, 6)))
                try:
                    await cur.delete([p for p, _ in picks])
                    acked.update(p for p, _ in picks)
                    md_durable = cur.mark_delete_position
                except ManagedLedgerFencedError:
                    uncertain.update(p for p, _ in picks)
            elif op < 0.70 and written:  # cumulative ack
                p = rng.choice(written)[0]
                try:
                    await cur.mark_delete(p)
                    acked.update(q for q, _ in written if q <= p)
                    md_durable = cur.mark_delete_position
                except ManagedLedgerFencedError:
                    uncertain.update(q for q, _ in written if q <= p)
            elif op < 0.75:
                h.bk.faults.fail_create(1)
            elif op < 0.78 and ml.ledger_list.current_id >= 0:  # another owner's recovery
                h.bk.faults.fail_add(1, LedgerFencedError("scripted fence"))
            elif op < 0.83:
                await ml.trim_consumed_ledgers()
            elif op < 0.93 or ml.state.value == "Fenced":  # restart: clean or a crash
                if rng.random() < 0.5:
                    await f.aclose()
                f = await h.new_factory(cfg)
                ml = await _open(h, f)
                cur = ml.cursors["s"]
                assert cur.mark_delete_position >= md_durable, "durable mark-delete never moves back"
                md = cur.mark_delete_position
            # invariants after every step
            assert cur.mark_delete_position >= md, "mark-delete never moves back"
            md = cur.mark_delete_position
            if ml.state.value == "Fenced":
                continue
            for p, _ in written:
                if p not in uncertain:
                    assert cur.is_acknowledged(p) == (p in acked or p <= md), (seed, p)
        f = await h.new_factory(cfg)
        ml = await _open(h, f)
        cur = ml.cursors["s"]
        log = await _log(ml)
        md = cur.mark_delete_position
        expect = [(p, d) for p, d in written if p > md or ml.ledger_list.get(p.ledger_id) is not None]
        assert log == [x for x in expect if ml.ledger_list.get(x[0].ledger_id) is not None], seed
        assert [p for p, _ in written if p > md] == [p for p, _ in log if p > md], "nothing unconsumed lost"
        got = []
        while batch := await cur.read_entries(50):
            got += [e.position for e in batch]
        assert [p for p in got if p not in uncertain] == [
            p for p, _ in written if p not in acked and p not in uncertain and p > md
        ]
    finally:
        await h.aclose()


def _no_task_failures(caplog) -> None:  # noqa: ANN001
    """Background tasks that died (a bug, e.g. an illegal state transition) fail the run."""
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR and "task" in r.getMessage()]
    assert not failures, [r.getMessage() + str(r.exc_info and r.exc_info[1]) for r in failures[:3]]


@pytest.mark.parametrize("seed", range(12))
async def test_random_faults(seed: int, caplog) -> None:
    caplog.set_level(logging.ERROR)
    await _run(seed, 150)
    _no_task_failures(caplog)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 160))
async def test_random_faults_long(seed: int, caplog) -> None:
    caplog.set_level(logging.ERROR)
    await _run(seed, 600)
    _no_task_failures(caplog)
