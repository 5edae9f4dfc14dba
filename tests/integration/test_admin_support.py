"""One ``magnetar standalone`` subprocess shared by the admin REST test modules.

A subprocess (not in-process) so the official, blocking ``pulsar`` client can
run in the test thread.  Policy checks and stats sampling are set fast.  The ten
modules that import ``standalone`` (test_admin_*, test_brokerfix_policies,
test_dispatch_rate_official, test_load_admin_standalone) share ONE process per
run (``admin_standalone`` in this directory's conftest.py): each uses its own
tenants, namespaces and topics, and puts back the cluster-wide settings it
changes (clusters, failure domains, isolation policies, dynamic configuration,
public/default's policies), so starting one per module (5-40 s each on a loaded
2-core machine) bought no isolation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from magnetar.testing.standalone import StandaloneProcess

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
def standalone(admin_standalone: StandaloneProcess) -> StandaloneProcess:
    return admin_standalone


@pytest.fixture(scope="module")
def http(standalone: StandaloneProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=standalone.web_url, timeout=15) as client:
        yield client
