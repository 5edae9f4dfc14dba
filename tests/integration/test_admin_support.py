"""A module-scoped ``magnetar standalone`` subprocess for the admin REST tests.

A subprocess (not in-process) so the official, blocking ``pulsar`` client can
run in the test thread.  Policy checks and stats sampling are set fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

FAST_PROPERTIES = {
    "magnetarPolicyCheckIntervalMs": "200",
    "statsUpdateFrequencyInSecs": "1",
    "forceDeleteNamespaceAllowed": "true",
    "brokerDeleteInactiveTopicsEnabled": "false",
    "managedLedgerMaxEntriesPerLedger": "5",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
}


def start_standalone(tmp: Path, properties: dict[str, str] | None = None) -> StandaloneProcess:
    conf = tmp / "standalone.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in {**FAST_PROPERTIES, **(properties or {})}.items()))
    proc = StandaloneProcess(tmp / "data", config_file=conf)
    proc.start()
    return proc


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = start_standalone(tmp_path_factory.mktemp("admin"))
    try:
        yield proc
    finally:
        proc.terminate()


@pytest.fixture(scope="module")
def http(standalone: StandaloneProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=standalone.web_url, timeout=15) as client:
        yield client
