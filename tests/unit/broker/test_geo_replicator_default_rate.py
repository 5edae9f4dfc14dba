"""The broker-wide replicator rate: dispatchThrottlingRatePerReplicatorInMsg/InByte (issue 18)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import magnetar.broker.service.broker_service  # noqa: F401 -- first: replication.service is imported by it
from magnetar.broker.config import ConfigError
from magnetar.broker.replication.service import ReplicationService, default_replicator_rate


def service(props: dict[str, Any]) -> ReplicationService:
    config = SimpleNamespace(cluster_name="A", as_properties=lambda: dict(props))
    return ReplicationService(SimpleNamespace(config=config, policy_documents=None))  # type: ignore[arg-type]


def topic(replicator_dispatch_rate: dict | None) -> Any:
    return SimpleNamespace(policies=SimpleNamespace(replicator_dispatch_rate=replicator_dispatch_rate))


def test_broker_default_applies_when_no_policy_is_set() -> None:
    svc = service({"dispatchThrottlingRatePerReplicatorInMsg": "50",
                   "dispatchThrottlingRatePerReplicatorInByte": "100000"})  # fmt: skip
    rate = svc.replicator_rate(topic(None))
    assert (rate.messages, rate.bytes) == (50, 100_000)


def test_topic_or_namespace_policy_wins_over_the_default() -> None:
    svc = service({"dispatchThrottlingRatePerReplicatorInMsg": "50"})
    rate = svc.replicator_rate(topic({"dispatchThrottlingRateInMsg": 20, "dispatchThrottlingRateInByte": -1,
                                      "ratePeriodInSecond": 1}))  # fmt: skip
    assert rate.messages == 20 and rate.bytes <= 0


def test_zero_or_unset_is_unlimited_and_bad_values_are_named() -> None:
    assert default_replicator_rate({}).unlimited
    assert default_replicator_rate({"dispatchThrottlingRatePerReplicatorInMsg": "0"}).unlimited
    with pytest.raises(ConfigError, match="dispatchThrottlingRatePerReplicatorInByte"):
        default_replicator_rate({"dispatchThrottlingRatePerReplicatorInByte": "fast"})
