"""Deterministic simulation of the load manager (see magnetar.testing.sim_load).

Many simulated brokers (6..12, plus one joining late) and 120..300 bundles with
Zipf-skewed load, all first placed on three brokers; the real placement and
ThresholdShedder run every simulated minute through a scale-out, the death of an
isolation primary, a hot spot and a broker joining.  Checked: shedding
converges (max/avg under a bound within a few rounds of each disturbance, nothing
moves in the quiet end), no bundle is shed twice within the grace period, and
isolation and anti-affinity are never violated.  CI runs ``CI_SEEDS``; ``-m slow``
adds more.  Replay one seed:

    MAGNETAR_SIM_SEED=<seed> .venv/bin/python -m pytest -q \
        tests/simulation/test_load_simulation.py::test_load_replay_seed -s
"""

from __future__ import annotations

import functools
import os

import pytest

from magnetar.testing.sim_load import RATIO_BOUND, SETTLE_ROUNDS, LoadSimReport, run_load_seed

CI_SEEDS = range(6)
SLOW_SEEDS = range(6, 100)


@functools.lru_cache(maxsize=16)
def _report(seed: int) -> LoadSimReport:
    return run_load_seed(seed)


@pytest.mark.parametrize("seed", CI_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_load_seed(seed: int) -> None:
    report = _report(seed)
    assert report.ok, report.describe()
    assert all(0 <= r <= SETTLE_ROUNDS for r in report.rounds_to_settle.values()), report.describe()
    assert set(report.rounds_to_settle) == {"scale-out", "broker-killed", "hot-spot", "broker-joined"}


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS, ids=lambda s: f"seed{s:04d}")
def test_load_seed_slow(seed: int) -> None:
    report = run_load_seed(seed)
    assert report.ok, report.describe()


def test_load_seed_without_history_smoothing() -> None:
    report = run_load_seed(11, history=0.0)
    assert report.ok, report.describe()


def test_load_replay_seed() -> None:
    raw = os.environ.get("MAGNETAR_SIM_SEED")
    if raw is None:
        pytest.skip("set MAGNETAR_SIM_SEED=<seed> to replay a seed")
    report = run_load_seed(int(raw))
    print(report.describe())
    assert report.ok, report.describe()


def test_load_same_seed_same_run() -> None:
    assert _report(2).describe() == run_load_seed(2).describe()


def test_load_simulation_is_skewed_and_really_sheds() -> None:
    """The CI seeds start far out of balance, shed, fail over isolation, and end inside the bound."""
    reports = [_report(s) for s in CI_SEEDS]
    assert all(r.worst_ratio["skew-before-shedding"] > 2.0 for r in reports), [r.describe() for r in reports]
    assert all(r.moves >= 30 for r in reports)
    assert all(r.counters.get("failovers-to-secondary") == 1 for r in reports)
    settled = [v for r in reports for k, v in r.worst_ratio.items() if k != "skew-before-shedding"]
    assert max(settled) <= RATIO_BOUND
