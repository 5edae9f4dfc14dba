"""Deterministic simulation of the ledger client (see magnetar.testing.sim_bookkeeper).

Two kinds of bookie node: ``fake`` (FakeBookie: simulated journal delay,
crash loses unsynced adds) and ``storage`` (the real bookie LedgerStorage over
a MemoryDisk that tears unsynced bytes on a crash, with a slow device).  CI
runs 200 seeds on fake bookies and 100 on real storage; ``-m slow`` adds 1800
more of each.  A failing seed prints its settings, the violations and the command
that replays it:

    MAGNETAR_SIM_SEED=<seed> MAGNETAR_SIM_STORAGE=<0|1> .venv/bin/python -m pytest -q \
        tests/simulation/test_bk_simulation.py::test_replay_seed -s
"""

from __future__ import annotations

import functools
import os

import pytest

from magnetar.bookkeeper.recovery import LedgerRecovery
from magnetar.testing.sim_bookkeeper import SimReport, run_seed

CI_SEEDS = range(200)
CI_STORAGE_SEEDS = range(100)
SLOW_SEEDS = range(200, 2000)


@functools.lru_cache(maxsize=512)
def _report(seed: int, storage: bool) -> SimReport:
    return run_seed(seed, storage=storage)


def _check(seed: int, storage: bool) -> None:
    report = _report(seed, storage)
    assert report.ok, report.describe()


@pytest.mark.parametrize("seed", CI_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_seed_fake_bookies(seed: int) -> None:
    _check(seed, storage=False)


@pytest.mark.parametrize("seed", CI_STORAGE_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_seed_real_storage(seed: int) -> None:
    _check(seed, storage=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_seed_slow(seed: int) -> None:
    for storage in (False, True):
        report = run_seed(seed, storage=storage)
        assert report.ok, report.describe()


def test_replay_seed() -> None:
    raw = os.environ.get("MAGNETAR_SIM_SEED")
    if raw is None:
        pytest.skip(
            "set MAGNETAR_SIM_SEED=<seed> (and MAGNETAR_SIM_STORAGE=1 for real storage) to replay a seed"
        )
    report = run_seed(int(raw), storage=os.environ.get("MAGNETAR_SIM_STORAGE", "0") == "1")
    print(report.describe())
    assert report.ok, report.describe()


@pytest.mark.parametrize("storage", [False, True], ids=["fake", "storage"])
def test_same_seed_same_run(storage: bool) -> None:
    a, b = _report(7, storage), run_seed(7, storage=storage)
    assert a.describe() == b.describe()
    assert [(r.ledger_id, sorted(r.acked), r.recovered_last) for r in a.ledgers] == [
        (r.ledger_id, sorted(r.acked), r.recovered_last) for r in b.ledgers
    ]


@pytest.mark.parametrize("storage", [False, True], ids=["fake", "storage"])
def test_the_simulation_exercises_faults_and_recovery(storage: bool) -> None:
    reports = [_report(s, storage) for s in range(40)]  # the runs of test_seed_* (cached)
    assert sum(r.counters["crashes"] for r in reports) > 10
    assert sum(r.counters["lost"] for r in reports) > 10
    assert sum(1 for r in reports for led in r.ledgers if led.recovered_last is not None) > 5
    assert sum(len(led.acked) for r in reports for led in r.ledgers) > 1000
    assert sum(r.settings.decommission for r in reports) > 3
    assert sum(r.counters.get("replicated_fragments", 0) for r in reports) > 10


def test_the_checker_catches_a_recovery_that_drops_the_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: a recovery that closes at the fenced LAC without reading forward
    loses acknowledged entries, and the invariants must say so for some seed."""

    async def no_forward_read(self, md, reader, entry_id):  # type: ignore[no-untyped-def]
        return None

    monkeypatch.setattr(LedgerRecovery, "_recovery_read", no_forward_read)
    bad = []
    for seed in range(100):
        report = run_seed(seed)
        if not report.ok:
            bad.append(report)
            if len(bad) == 2:
                break
    assert bad, "a broken recovery went unnoticed by the simulation checker"
    assert any("acked" in v for r in bad for v in r.violations)
    assert "MAGNETAR_SIM_SEED=" in bad[0].describe()
