"""Configuration keys: those Magnetar reads are typed once and never called unknown; the rest, one line.

A real ``magnetar standalone`` is started with a Pulsar-style ``standalone.conf``
mixing keys that different components read (broker, authentication, schema,
embedded bookie, ledger client, broker services) with keys nobody in Magnetar
reads.  Its log has exactly one "not used" line, naming exactly the unknown keys.
"""

from __future__ import annotations

import re

import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pytestmark = pytest.mark.skipif(broker_unavailable_reason() is not None, reason="no broker")

KNOWN = {
    "authenticationEnabled": "false",
    "authorizationEnabled": "false",
    "superUserRoles": "admin",
    "schemaCompatibilityStrategy": "FULL",
    "managedLedgerMaxEntriesPerLedger": "50000",
    "managedLedgerCacheSizeMB": "32",
    "journalSyncData": "false",
    "gcWaitTime": "300000",
    "diskUsageThreshold": "0.99",
    "bookkeeperClientRackawarePolicyEnabled": "true",
    "bookkeeperClientTimeoutInSeconds": "30",
    "brokerDeleteInactiveTopicsMode": "delete_when_no_subscriptions",
    "delayedDeliveryEnabled": "true",
}
UNKNOWN = {
    "brokerServicePurgeInactiveFrequencyInSeconds": "60",
    "zooKeeperCacheExpirySeconds": "300",
    "myPluginSetting": "x",
}


def test_one_line_names_only_the_unknown_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "standalone.conf"
    conf.write_text(
        "# a Pulsar standalone.conf\n" + "".join(f"{k}={v}\n" for k, v in {**KNOWN, **UNKNOWN}.items())
    )
    proc = StandaloneProcess(tmp_path / "data", config_file=conf)
    proc.start(timeout_s=60)
    assert proc.terminate() == 0
    log = proc.log_path.read_text()
    lines = [line for line in log.splitlines() if "not used by Magnetar" in line or "unknown" in line.lower()]
    assert len(lines) == 1, lines
    named = set(re.split(r",\s*", lines[0].split("(kept for plugins): ", 1)[1].strip()))
    assert named == set(UNKNOWN)
    for key in KNOWN:
        assert key not in log, key
