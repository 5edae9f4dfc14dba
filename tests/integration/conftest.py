"""Fixtures shared by several integration modules.

``admin_standalone``: the fast-policy ``magnetar standalone`` of the admin REST
modules (see test_admin_support.py), started once per run instead of once per
module, stopped right after the last test that uses it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason, stop_after_last_user


@pytest.fixture(scope="session")
def admin_standalone(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneProcess]:
    from tests.integration.test_admin_support import start_standalone

    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = start_standalone(tmp_path_factory.mktemp("admin"))
    stop_after_last_user(request, proc.terminate)
    try:
        yield proc
    finally:
        proc.terminate()
