"""FaultPlan: scripted and seeded-random faults."""

from __future__ import annotations

import pytest

from magnetar.runtime.rng import Rng
from magnetar.testing.clock import ManualClock, VirtualClock, virtual_time
from magnetar.testing.faults import FaultAction, FaultPlan, FaultRule, InjectedFault


class Fenced(Exception):
    pass


def test_scripted_fail_the_third_put_once() -> None:
    plan = FaultPlan()
    rule = plan.fail("put", "/ledgers/*", error=Fenced, after=2, times=1, label="third put")
    outcomes = [plan.check("put", "/ledgers/L1") for _ in range(5)]
    assert [o is not None for o in outcomes] == [False, False, True, False, False]
    assert isinstance(outcomes[2].error(), Fenced)  # type: ignore[union-attr]
    assert "third put" in str(outcomes[2].error())  # type: ignore[union-attr]
    assert plan.check("get", "/ledgers/L1") is None
    assert plan.check("put", "/admin/x") is None
    assert rule.exhausted and rule.fired == 1
    assert plan.statistics() == {"rules": 1, "live_rules": 0, "fired": 1}


def test_globs_and_first_firing_rule_wins() -> None:
    plan = FaultPlan()
    plan.drop("read*", "bookie-[12]:3181")
    plan.fail("*", "*", error=RuntimeError("boom"))
    assert plan.check("readEntry", "bookie-1:3181").dropped  # type: ignore[union-attr]
    fault = plan.check("readEntry", "bookie-3:3181")
    assert fault is not None and fault.action is FaultAction.FAIL
    e1, e2 = fault.error(), fault.error()
    assert isinstance(e1, RuntimeError) and str(e1) == "boom" and e1 is not e2


def test_random_faults_replay_with_the_seed() -> None:
    def run(seed: int) -> list[bool]:
        plan = FaultPlan(Rng(seed))
        plan.fail("add", probability=0.3)
        return [plan.check("add", str(i)) is not None for i in range(200)]

    a = run(42)
    assert a == run(42)
    assert a != run(43)
    assert 30 < sum(a) < 90


def test_probability_needs_an_rng_and_values_are_checked() -> None:
    with pytest.raises(ValueError):
        FaultPlan().fail(probability=0.5)
    with pytest.raises(ValueError):
        FaultRule(FaultAction.FAIL, probability=1.5)
    with pytest.raises(ValueError):
        FaultRule(FaultAction.DELAY, delay_s=-1)


def test_pause_resume_and_history() -> None:
    plan = FaultPlan(history_max=3)
    plan.drop()
    plan.pause()
    assert plan.check("x", "k") is None
    plan.resume()
    for i in range(5):
        assert plan.check("x", str(i)) is not None
    assert [f.key for f in plan.history] == ["2", "3", "4"]
    plan.clear()
    assert plan.check("x", "k") is None


async def test_inject_raises_delays_and_reports_drops() -> None:
    clock = ManualClock()
    plan = FaultPlan()
    plan.fail("create", times=1)
    plan.delay("write", delay_s=5.0, times=1)
    plan.drop("send", times=1)
    with pytest.raises(InjectedFault):
        await plan.inject("create", "/a", clock)
    assert await plan.inject("create", "/a", clock) is None
    dropped = await plan.inject("send", "b1", clock)
    assert dropped is not None and dropped.dropped


@virtual_time
async def test_delay_uses_the_injected_clock() -> None:
    clock = VirtualClock()
    plan = FaultPlan()
    plan.delay("write", "*", delay_s=30.0)
    t0 = clock.monotonic()
    fault = await plan.inject("write", "journal", clock)
    assert fault is not None and fault.action is FaultAction.DELAY
    assert clock.monotonic() - t0 == pytest.approx(30.0)
