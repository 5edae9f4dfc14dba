from __future__ import annotations

import pytest

from magnetar.testing.clock import ManualClock
from magnetar.testing.ml_conformance import MemoryHarness


@pytest.fixture
async def harness():
    h = MemoryHarness()
    yield h
    await h.aclose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def manual_harness(clock):
    h = MemoryHarness(clock)
    yield h
    await h.aclose()
