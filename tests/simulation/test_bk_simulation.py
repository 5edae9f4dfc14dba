"""Deterministic simulation of the ledger client (see magnetar.testing.sim_bookkeeper).

CI runs seeds 0..199 (a few seconds); ``-m slow`` adds 200..1999.  A failing
seed prints its settings, the violations and the command that replays it:

    MAGNETAR_SIM_SEED=<seed> .venv/bin/python -m pytest -q \
        tests/simulation/test_bk_simulation.py::test_replay_seed -s
"""

from __future__ import annotations

import os

import pytest

from magnetar.bookkeeper.recovery import LedgerRecovery
from magnetar.testing.sim_bookkeeper import run_seed

CI_SEEDS = range(200)
SLOW_SEEDS = range(200, 2000)


def _check(seed: int) -> None:
    report = run_seed(seed)
    assert report.ok, report.describe()


@pytest.mark.parametrize("seed", CI_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_seed(seed: int) -> None:
    _check(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_seed_slow(seed: int) -> None:
    _check(seed)


def test_replay_seed() -> None:
    raw = os.environ.get("MAGNETAR_SIM_SEED")
    if raw is None:
        pytest.skip("set MAGNETAR_SIM_SEED=<seed> to replay one simulation seed")
    report = run_seed(int(raw))
    print(report.describe())
    assert report.ok, report.describe()


def test_same_seed_same_run() -> None:
    a, b = run_seed(7), run_seed(7)
    assert a.describe() == b.describe()
    assert [(r.ledger_id, sorted(r.acked), r.recovered_last) for r in a.ledgers] == [
        (r.ledger_id, sorted(r.acked), r.recovered_last) for r in b.ledgers
    ]


def test_the_simulation_exercises_faults_and_recovery() -> None:
    reports = [run_seed(s) for s in range(40)]
    assert sum(r.counters["crashes"] for r in reports) > 10
    assert sum(r.counters["lost"] for r in reports) > 10
    assert sum(1 for r in reports for led in r.ledgers if led.recovered_last is not None) > 5
    assert sum(len(led.acked) for r in reports for led in r.ledgers) > 1000


def test_the_checker_catches_a_recovery_that_drops_the_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: a recovery that closes at the fenced LAC without reading forward
    loses acknowledged entries, and the invariants must say so for some seed."""

    async def no_forward_read(self, md, reader, entry_id):  # type: ignore[no-untyped-def]
        return None

    monkeypatch.setattr(LedgerRecovery, "_recovery_read", no_forward_read)
    bad = [r for r in (run_seed(s) for s in range(60)) if not r.ok]
    assert bad, "a broken recovery went unnoticed by the simulation checker"
    assert any("acked" in v for r in bad for v in r.violations)
    assert "MAGNETAR_SIM_SEED=" in bad[0].describe()
