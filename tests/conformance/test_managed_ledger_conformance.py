"""The managed-ledger conformance suite over every storage stack available."""

from __future__ import annotations

import pytest

from magnetar.testing.ml_conformance import CHECKS, MemoryHarness


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_memory_bookkeeper(check) -> None:
    h = MemoryHarness()
    try:
        await check(h)
    finally:
        await h.aclose()
