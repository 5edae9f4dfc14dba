import asyncio

import pytest

from magnetar.runtime import IdGenerator, RealClock, Rng, TaskSupervisor


def test_rng_is_reproducible_and_forks_independently():
    a, b = Rng(42), Rng(42)
    assert [a.randint(0, 1000) for _ in range(10)] == [b.randint(0, 1000) for _ in range(10)]
    f1, f2 = Rng(42).fork("net"), Rng(42).fork("net")
    assert f1.random() == f2.random()
    assert Rng(42).fork("net").random() != Rng(42).fork("disk").random()


def test_id_generator_counts_from_start():
    g = IdGenerator(5)
    assert [g.next(), g.next()] == [5, 6]


async def test_real_clock_sleep_and_call_later():
    clock = RealClock()
    t0 = clock.monotonic()
    fired = asyncio.Event()
    clock.call_later(0.01, fired.set)
    await asyncio.wait_for(fired.wait(), 1)
    assert clock.monotonic() >= t0
    assert clock.time_ms() > 1_600_000_000_000


async def test_supervisor_reports_errors_and_cancels_on_close():
    errors = []
    sup = TaskSupervisor("t", on_error=lambda name, exc: errors.append((name, exc)))

    async def boom():
        raise ValueError("x")

    sup.spawn(boom(), "boom")
    forever = sup.spawn(asyncio.sleep(3600), "sleeper")
    await asyncio.sleep(0.01)
    assert errors and isinstance(errors[0][1], ValueError) and errors[0][0] == "t:boom"
    await sup.aclose()
    assert forever.cancelled()
    with pytest.raises(RuntimeError):
        sup.spawn(asyncio.sleep(0))
