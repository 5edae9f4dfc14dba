"""End-to-end tests drive real ``magnetar standalone`` processes (see magnetar.testing.standalone)."""

from __future__ import annotations

import pytest

from magnetar.testing.standalone import broker_unavailable_reason


@pytest.fixture(autouse=True)
def _needs_the_broker():
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
