"""Deterministic simulation of bundle ownership (see magnetar.testing.sim_ownership).

Three brokers running the real cluster namespace service, one metadata
service, five fake bookies, on virtual time; broker crashes, pauses (the
stale-owner race: a paused owner resumes and writes after another broker
took its bundle) and session expiries, their mix drawn from the seed.  CI
runs ``CI_SEEDS``; ``-m slow`` (``MAGNETAR_SLOW=1`` in run_all) adds
``SLOW_SEEDS``.  A failing seed prints its settings, the violations and the
command that replays it:

    MAGNETAR_SIM_SEED=<seed> .venv/bin/python -m pytest -q \
        tests/simulation/test_own_simulation.py::test_replay_seed -s
"""

from __future__ import annotations

import functools
import os

import pytest

from magnetar.testing.sim_ownership import OwnershipReport, run_seed

CI_SEEDS = range(8)
SLOW_SEEDS = range(8, 300)


@functools.lru_cache(maxsize=64)
def _report(seed: int) -> OwnershipReport:
    return run_seed(seed)


@pytest.mark.parametrize("seed", CI_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_ownership_seed(seed: int) -> None:
    report = _report(seed)
    assert report.ok, report.describe()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_ownership_seed_slow(seed: int) -> None:
    report = run_seed(seed)
    assert report.ok, report.describe()


def test_replay_seed() -> None:
    raw = os.environ.get("MAGNETAR_SIM_SEED")
    if raw is None:
        pytest.skip("set MAGNETAR_SIM_SEED=<seed> to replay a seed")
    report = run_seed(int(raw))
    print(report.describe())
    assert report.ok, report.describe()


def test_same_seed_same_run() -> None:
    a, b = _report(3), run_seed(3)
    assert a.describe() == b.describe()


def test_the_simulation_exercises_the_faults() -> None:
    """The CI seeds really crash, pause and expire brokers, move bundles, and fence a stale owner."""
    reports = [_report(s) for s in CI_SEEDS]
    total = {k: sum(r.counters.get(k, 0) for r in reports) for k in {k for r in reports for k in r.counters}}
    assert total.get("crashes", 0) >= 1, total
    assert total.get("pauses", 0) >= 3, total
    assert total.get("expiries", 0) >= 3, total
    assert total.get("redirects", 0) >= 100, total
    assert sum(r.acked for r in reports) >= 1000, total
    fenced = total.get("fail:ManagedLedgerFencedError", 0) + total.get("fail:ManagedLedgerClosedError", 0)
    assert fenced >= 1, total
