"""Backoff: doubling, cap, jitter bounds, mandatory stop, reset."""

from __future__ import annotations

import pytest

from magnetar.common.backoff import Backoff, BackoffConfig
from magnetar.runtime.rng import Rng
from magnetar.testing.clock import ManualClock


def test_doubles_to_the_cap_with_at_most_ten_percent_jitter() -> None:
    b = Backoff(BackoffConfig(100, 60_000), Rng(1))
    nominal = 100
    for _ in range(20):
        got = b.next_ms()
        assert max(100, nominal - nominal // 10) <= got <= nominal
        nominal = min(nominal * 2, 60_000)
    assert nominal == 60_000


def test_jitter_is_seeded() -> None:
    def schedule(seed: int) -> list[int]:
        b = Backoff(BackoffConfig(), Rng(seed))
        return [b.next_ms() for _ in range(15)]

    assert schedule(7) == schedule(7)
    assert schedule(7) != schedule(8)


def test_reset_and_reduce_to_half() -> None:
    b = Backoff(BackoffConfig(100, 10_000), Rng(2))
    for _ in range(5):
        b.next_ms()  # next nominal is now 3200
    b.reduce_to_half()
    assert 1440 <= b.next_ms() <= 1600
    b.reset()
    assert b.next_ms() == 100


def test_mandatory_stop_caps_the_total_wait() -> None:
    clock = ManualClock()
    b = Backoff(BackoffConfig(100, 60_000, mandatory_stop_ms=1_000), Rng(3), clock)
    waited = 0
    delays = []
    while not b.mandatory_stop_made:
        d = b.next_ms()
        delays.append(d)
        clock.advance_nowait(d / 1000)
        waited += d
    assert waited <= 1_000 + 100
    assert delays[-1] <= 1_000
    b.reset()
    assert not b.mandatory_stop_made


def test_invalid_configs() -> None:
    with pytest.raises(ValueError):
        BackoffConfig(0, 10)
    with pytest.raises(ValueError):
        BackoffConfig(100, 50)
    with pytest.raises(ValueError):
        Backoff(BackoffConfig(mandatory_stop_ms=5), Rng(1))
