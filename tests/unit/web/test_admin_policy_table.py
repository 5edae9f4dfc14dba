"""The policy table and body parsing: Pulsar's field names, 400 vs 412, and defaults."""

from __future__ import annotations

import pytest

from magnetar.broker import errors
from magnetar.broker.admin import policies as p
from magnetar.broker.resources import default_policies
from magnetar.common import rest_models as m


def test_every_namespace_field_exists_in_fresh_policies() -> None:
    fresh = default_policies(["standalone"])
    stored_elsewhere = {"bookieAffinityGroup", "antiAffinityGroup"}
    for spec in p.SPECS:
        if spec.ns_field and spec.ns_field not in stored_elsewhere:
            assert spec.ns_field in fresh, spec.name


def test_suffix_tables_are_unique_and_complete() -> None:
    assert len(p.BY_NS_SUFFIX) == len([s for s in p.SPECS if s.ns_suffix])
    assert len(p.BY_TOPIC_SUFFIX) == len([s for s in p.SPECS if s.topic_suffix])
    assert p.BY_NS_SUFFIX["maxProducersPerTopic"].topic_suffix == "maxProducers"
    assert p.BY_NS_SUFFIX["maxUnackedMessagesPerConsumer"].topic_suffix == "maxUnackedMessagesOnConsumer"
    assert p.BY_NS_SUFFIX["schemaCompatibilityStrategy"].ns_set == "PUT"


@pytest.mark.parametrize(
    ("kind", "raw", "error"),
    [
        (p.INT, "30", p.BadBodyError),
        (p.INT, True, p.BadBodyError),
        (p.INT, -1, errors.PreconditionFailedError),
        (p.INT, 2**31, errors.PreconditionFailedError),
        (p.LONG, 2**64, p.BadBodyError),
        (p.BOOL, 1, p.BadBodyError),
        (p.SUBTYPES, ["Shared", "Nope"], p.BadBodyError),
        (m.SchemaCompatibilityStrategy, "SIDEWAYS", p.BadBodyError),
        (m.PersistencePolicies, {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2}, p.BadBodyError),
        (m.RetentionPolicies, [], p.BadBodyError),
    ],
)
def test_bad_values(kind: object, raw: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        p.parse_value(kind, raw)


def test_good_values_are_normalised() -> None:
    assert p.parse_value(p.LONG, -1) == -1
    assert p.parse_value(p.SUBTYPES, ["Shared", "Exclusive", "Shared"]) == ["Exclusive", "Shared"]
    assert p.parse_value(m.BacklogQuota, {"limit": 10, "policy": "producer_exception"}) == {
        "limitSize": 10,
        "limitTime": -1,
        "policy": "producer_exception",
    }
    assert p.parse_value(m.DispatchRate, {"dispatchThrottlingRateInMsg": 5, "extra": 1}) == {
        "dispatchThrottlingRateInMsg": 5,
        "dispatchThrottlingRateInByte": -1,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    }
    with pytest.raises(p.BadBodyError):
        p.load_json(b"{")
    assert p.load_json(b"group-a", allow_bare_string=True) == "group-a"
