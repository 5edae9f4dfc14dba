from __future__ import annotations

import pytest

from magnetar.testing.ml_conformance import MemoryHarness


@pytest.fixture
async def harness():
    h = MemoryHarness()
    yield h
    await h.aclose()
