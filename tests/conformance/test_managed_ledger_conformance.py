"""The managed-ledger conformance suite over every storage stack available:
the in-memory BookKeeper, and the real ledger client over the in-process bookie."""

from __future__ import annotations

import pytest

from magnetar.testing.ml_conformance import CHECKS, LocalBookieHarness, MemoryHarness


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_memory_bookkeeper(check) -> None:
    h = MemoryHarness()
    try:
        await check(h)
    finally:
        await h.aclose()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_real_bookie(check, tmp_path) -> None:
    h = await LocalBookieHarness(str(tmp_path / "bookie")).start()
    try:
        await check(h)
    finally:
        await h.aclose()
