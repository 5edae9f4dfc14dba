"""ManualClock and the virtual-time loop."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.runtime.clock import Clock
from magnetar.testing.clock import (
    DEFAULT_WALL_MS,
    ManualClock,
    VirtualClock,
    VirtualTimeEventLoop,
    VirtualTimeEventLoopPolicy,
    run_virtual,
    virtual_time,
    virtual_time_loop,
)

# ------------------------------------------------------------------ ManualClock


def test_manual_clock_is_a_runtime_clock() -> None:
    assert isinstance(ManualClock(), Clock)
    assert isinstance(VirtualClock(), Clock)


async def test_manual_clock_fires_timers_in_order_and_wakes_sleepers() -> None:
    clock = ManualClock(start_s=10.0, wall_ms=5_000)
    fired: list[str] = []
    clock.call_later(3, lambda: fired.append("c3"))
    clock.call_later(1, lambda: fired.append("c1"))
    cancelled = clock.call_later(2, lambda: fired.append("never"))
    clock.call_later(1, lambda: fired.append("c1b"))
    cancelled.cancel()

    async def sleeper() -> None:
        await clock.sleep(2.5)
        fired.append(f"slept@{clock.monotonic()}")
        clock.call_later(0.25, lambda: fired.append("rearmed"))  # falls inside the same advance

    task = asyncio.get_running_loop().create_task(sleeper())
    await clock.settle()
    assert clock.pending_timers() == 4
    assert await clock.advance(2.9) == 4
    assert fired == ["c1", "c1b", "slept@12.5", "rearmed"]
    assert task.done()
    assert clock.monotonic() == pytest.approx(12.9)
    assert clock.time_ms() == 7_900
    await clock.advance(0.1)
    assert fired[-1] == "c3"
    assert clock.next_deadline() is None


async def test_manual_clock_wall_jump_and_nowait() -> None:
    clock = ManualClock()
    assert clock.time_ms() == DEFAULT_WALL_MS
    clock.set_wall_ms(1_000)
    before = clock.monotonic()
    clock.call_later(5, lambda: None)
    assert clock.advance_nowait(5) == 1
    assert clock.time_ms() == 6_000
    assert clock.monotonic() == before + 5
    assert not await clock.advance_to_next()
    with pytest.raises(ValueError):
        await clock.advance(-1)


async def test_manual_clock_sleep_cancelled_leaves_no_timer() -> None:
    clock = ManualClock()
    task = asyncio.get_running_loop().create_task(clock.sleep(60))
    await clock.settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.pending_timers() == 0


# ------------------------------------------------------------------ virtual loop


def test_virtual_sleep_of_an_hour_is_instant_and_timers_keep_order() -> None:
    order: list[tuple[str, float]] = []

    async def main() -> float:
        clock = VirtualClock()
        loop = asyncio.get_running_loop()
        t0 = clock.monotonic()
        w0 = clock.time_ms()
        clock.call_later(1800, lambda: order.append(("half", clock.monotonic() - t0)))
        clock.call_later(60, lambda: order.append(("minute", clock.monotonic() - t0)))

        async def worker(name: str, delay: float) -> None:
            await clock.sleep(delay)
            order.append((name, clock.monotonic() - t0))

        async with asyncio.TaskGroup() as tg:
            tg.create_task(worker("w3000", 3000))
            tg.create_task(worker("w10", 10))
            await clock.sleep(3600)
        order.append(("main", clock.monotonic() - t0))
        assert clock.time_ms() - w0 == 3_600_000
        assert isinstance(loop, VirtualTimeEventLoop) and loop.jumps >= 5
        return clock.monotonic() - t0

    started = time.monotonic()
    elapsed_virtual = run_virtual(main())
    elapsed_real = time.monotonic() - started
    assert elapsed_virtual == pytest.approx(3600)
    assert [name for name, _ in order] == ["w10", "minute", "half", "w3000", "main"]
    assert [round(t) for _, t in order] == [10, 60, 1800, 3000, 3600]
    assert elapsed_real < 30  # generous: only fails if time were real (an hour)


def test_wait_for_timeouts_follow_virtual_time() -> None:
    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        never: asyncio.Future[None] = loop.create_future()
        timed_out = False
        try:
            await asyncio.wait_for(never, timeout=30)
        except TimeoutError:
            timed_out = True
        async with asyncio.timeout(5):
            await asyncio.sleep(4.5)  # finishes inside the deadline
        return timed_out, loop.time() - t0

    timed_out, spent = run_virtual(main())
    assert timed_out
    assert spent == pytest.approx(34.5)


def test_virtual_loop_context_manager_and_wall_clock() -> None:
    with virtual_time_loop(start_s=0.0, wall_ms=1_000) as loop:
        clock = VirtualClock(loop)
        assert clock.monotonic() == 0.0 and clock.time_ms() == 1_000
        loop.run_until_complete(asyncio.sleep(2.5))
        assert clock.time_ms() == 3_500
        clock.set_wall_ms(0)
        loop.jump(1)
        assert clock.time_ms() == 1_000 and clock.monotonic() == 3.5
    assert loop.is_closed()


def test_virtual_clock_refuses_a_real_loop() -> None:
    async def main() -> None:
        VirtualClock().monotonic()

    with pytest.raises(TypeError):
        asyncio.run(main())


def test_thread_work_is_not_timed_out_by_a_jump() -> None:
    """While a run_in_executor job is in flight the loop waits in real time."""

    async def main() -> tuple[int, float, list[float]]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ticks: list[float] = []

        async def ticker() -> None:
            for _ in range(3):
                await asyncio.sleep(100)
                ticks.append(loop.time() - t0)

        task = loop.create_task(ticker())
        value = await asyncio.wait_for(loop.run_in_executor(None, lambda: time.sleep(0.2) or 7), timeout=5)
        spent = loop.time() - t0
        await task
        return value, spent, ticks

    value, spent, ticks = run_virtual(main())
    assert value == 7
    assert 0.1 < spent < 5  # real time passed, no jump to the ticker's 100 s
    assert [round(t) for t in ticks] == [100, 200, 300]  # then jumping resumes


def test_real_io_still_works_on_the_virtual_loop() -> None:
    """A thread's result arrives through the loop's self-pipe; the threshold keeps time honest."""

    async def main() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        value = await asyncio.wait_for(loop.run_in_executor(None, lambda: time.sleep(0.05) or 7), timeout=10)
        return value, loop.time() - t0

    value, spent = run_virtual(main(), autojump_threshold_s=1.0)
    assert value == 7
    assert spent < 10


def test_policy_makes_virtual_loops() -> None:
    loop = VirtualTimeEventLoopPolicy(start_s=5.0).new_event_loop()
    try:
        assert isinstance(loop, VirtualTimeEventLoop) and loop.time() == 5.0
    finally:
        loop.close()


@virtual_time
async def test_decorated_async_test_runs_on_virtual_time(tmp_path) -> None:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeEventLoop)
    assert tmp_path.exists()  # sync fixtures still arrive
    t0 = loop.time()
    await asyncio.sleep(86_400)
    assert loop.time() - t0 == pytest.approx(86_400)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100, allow_nan=False), st.booleans()), max_size=30), st.floats(0, 120))
def test_manual_clock_fires_exactly_the_due_live_timers_in_order(schedule, step) -> None:
    clock = ManualClock(start_s=0.0)
    fired: list[int] = []
    expected = []
    for i, (delay, cancel) in enumerate(schedule):
        handle = clock.call_later(delay, lambda i=i: fired.append(i))
        if cancel:
            handle.cancel()
        elif delay <= step:
            expected.append((delay, i))
    assert clock.advance_nowait(step) == len(expected)
    assert fired == [i for _, i in sorted(expected)]
    assert clock.monotonic() == step
