from __future__ import annotations

import pytest

from magnetar.broker.errors import InvalidTopicNameError
from magnetar.broker.service.names import from_managed_ledger_name, parse_namespace, parse_topic


def test_short_and_full_names() -> None:
    assert parse_topic("x").full_name == "persistent://public/default/x"
    assert parse_topic("t/ns/x").full_name == "persistent://t/ns/x"
    r = parse_topic("non-persistent://t/ns/x")
    assert r.domain == "non-persistent" and not r.persistent and r.namespace == "t/ns"


def test_partitions() -> None:
    r = parse_topic("persistent://t/ns/x-partition-3")
    assert r.partition_index == 3 and r.is_partition
    assert r.base.full_name == "persistent://t/ns/x"
    assert r.base.partition(1).full_name == "persistent://t/ns/x-partition-1"
    assert parse_topic("persistent://t/ns/x-partition-03").partition_index == -1


def test_managed_ledger_name_round_trip() -> None:
    r = parse_topic("persistent://t/ns/a b%c")
    back = from_managed_ledger_name(r.managed_ledger_name)
    assert back is not None and back.full_name == r.full_name
    assert from_managed_ledger_name("not/a/topic") is None


def test_system_topics() -> None:
    assert parse_topic("persistent://public/default/__change_events").is_system
    assert not parse_topic("persistent://public/default/x").is_system


@pytest.mark.parametrize("bad", ["", "a/b", "a/b/c/d/e/f", "http://t/ns/x", "persistent://t/n s/x"])
def test_invalid(bad: str) -> None:
    with pytest.raises(InvalidTopicNameError):
        parse_topic(bad)


def test_namespaces() -> None:
    assert parse_namespace("public/default") == ("public", "default")
    with pytest.raises(InvalidTopicNameError):
        parse_namespace("nope")
