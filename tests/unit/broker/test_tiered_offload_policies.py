"""Effective offload policies: broker keys, then the namespace/topic document, then the
namespace's threshold and deletion-lag fields."""

from __future__ import annotations

import pytest

from magnetar.broker.admin.offload import BadMessageIdError, effective_offload_policies, parse_message_id
from magnetar.broker.config import BrokerConfig
from magnetar.managed_ledger.api import Position


def test_broker_keys_then_namespace_then_topic() -> None:
    base = (
        BrokerConfig()
        .with_overrides(
            {
                "managedLedgerOffloadDriver": "aws-s3",
                "s3ManagedLedgerOffloadBucket": "broker-bucket",
                "s3ManagedLedgerOffloadCredentialId": "AKIA1",
                "managedLedgerOffloadDeletionLagMs": "5000",
            }
        )
        .offload_policies()
    )
    assert (base.driver, base.bucket, base.deletion_lag_ms, base.threshold_bytes) == (
        "aws-s3",
        "broker-bucket",
        5000,
        -1,
    )
    assert effective_offload_policies(base, {}, {}) == base
    ns = {
        "offload_policies": {
            "managedLedgerOffloadDriver": "aws-s3",
            "managedLedgerOffloadBucket": "ns-bucket",
        },
        "offload_threshold": 1024,
        "offload_threshold_in_seconds": -1,  # not set at this level
        "offload_deletion_lag_ms": None,
    }
    p = effective_offload_policies(base, {}, ns)
    assert (p.bucket, p.threshold_bytes, p.threshold_s, p.credential_id) == ("ns-bucket", 1024, -1, "AKIA1")
    assert p.deletion_lag_ms == 5000
    topic = {"offloadPolicies": {"managedLedgerOffloadDriver": "filesystem", "fileSystemURI": "/tmp/t"}}
    p = effective_offload_policies(base, topic, {**ns, "offload_deletion_lag_ms": -1})
    assert (p.driver, p.file_system_uri, p.deletion_lag_ms) == ("filesystem", "/tmp/t", -1)


def test_message_id_body() -> None:
    assert parse_message_id({"ledgerId": 3, "entryId": 0, "partitionIndex": -1}) == Position(3, 0)
    for bad in (None, {}, {"ledgerId": 1}, {"ledgerId": "x", "entryId": 0}, [1, 2]):
        with pytest.raises(BadMessageIdError):
            parse_message_id(bad)
