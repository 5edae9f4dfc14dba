"""runtime.wait_for: asyncio.wait_for with the timeout measured by the injected clock."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.runtime import RealClock, wait_for
from magnetar.testing.clock import ManualClock


async def test_times_out_on_the_clock_not_on_real_time() -> None:
    clock = ManualClock()
    never = asyncio.Event()
    waiter = asyncio.ensure_future(wait_for(clock, never.wait(), 30.0))
    await asyncio.sleep(0.05)  # real time passes, the clock does not: still waiting
    assert not waiter.done()
    await clock.advance(30.0)
    with pytest.raises(TimeoutError):
        await waiter
    assert clock.pending_timers() == 0


async def test_result_before_the_deadline_cancels_the_timer() -> None:
    clock = ManualClock()

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert await wait_for(clock, answer(), 5.0) == 42
    assert clock.pending_timers() == 0


async def test_caller_cancel_cancels_the_awaited_but_not_a_shielded_one() -> None:
    clock = RealClock()
    inner = asyncio.ensure_future(asyncio.sleep(10))
    outer = asyncio.ensure_future(wait_for(clock, asyncio.shield(inner), 10.0))
    await asyncio.sleep(0.01)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert not inner.cancelled()
    inner.cancel()


async def test_errors_of_the_awaited_propagate() -> None:
    async def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        await wait_for(RealClock(), boom(), 1.0)
