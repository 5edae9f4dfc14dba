"""Topic and namespace names: every row of reference §10, plus the derived forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetar.common.errors import MagnetarError
from magnetar.common.naming import (
    SYSTEM_NAMESPACE,
    InvalidNamespaceName,
    InvalidTopicName,
    NamespaceName,
    TopicDomain,
    TopicName,
    decode_local_name,
    encode_local_name,
)

# --- §10 table: input -> canonical form


@pytest.mark.parametrize(
    ("given_name", "canonical"),
    [
        ("my-topic", "persistent://public/default/my-topic"),
        ("t/ns/my-topic", "persistent://t/ns/my-topic"),
        ("persistent://t/ns/x", "persistent://t/ns/x"),
        ("persistent://t/cluster/ns/x", "persistent://t/cluster/ns/x"),
        ("non-persistent://t/ns/x", "non-persistent://t/ns/x"),
    ],
)
def test_reference_table_canonical_forms(given_name: str, canonical: str) -> None:
    tn = TopicName.get(given_name)
    assert str(tn) == canonical
    assert TopicName.get(canonical) == tn


def test_v2_name_parts() -> None:
    tn = TopicName.get("persistent://t/ns/x")
    assert (tn.domain, tn.tenant, tn.namespace_portion, tn.local_name, tn.cluster) == (
        TopicDomain.PERSISTENT,
        "t",
        "ns",
        "x",
        None,
    )
    assert tn.is_v2 and tn.is_persistent
    assert tn.namespace == NamespaceName.get("t/ns")


def test_legacy_v1_name_keeps_slashes_in_local_name() -> None:
    tn = TopicName.get("persistent://t/cluster/ns/a/b/c")
    assert (tn.tenant, tn.cluster, tn.namespace_portion, tn.local_name) == ("t", "cluster", "ns", "a/b/c")
    assert not tn.is_v2
    assert str(tn.namespace) == "t/cluster/ns"
    assert tn.persistence_naming == "t/cluster/ns/persistent/a%2Fb%2Fc"
    assert tn.lookup_name == "persistent/t/cluster/ns/a%2Fb%2Fc"


def test_non_persistent_domain() -> None:
    tn = TopicName.get("non-persistent://t/ns/x")
    assert tn.domain is TopicDomain.NON_PERSISTENT and not tn.is_persistent


@pytest.mark.parametrize(
    "bad",
    [
        "ns/my-topic",  # two tokens
        "a/b/c/d",  # four tokens
        "a/b/c/d/e",
        "http://t/ns/x",  # unknown domain
        "persistent://t/x",  # too few parts
        "persistent://t/ns/",  # blank local name
        "persistent://t/ns/   ",
        "persistent://t//x",  # empty namespace
        "persistent://t!/ns/x",  # bad tenant char
        "persistent://t/n s/x",  # bad namespace char
        "persistent://t/c#/ns/x",  # bad cluster char
        "",
    ],
)
def test_invalid_names_raise_a_clear_typed_error(bad: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        TopicName.get(bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value, MagnetarError)
    assert info.value.message
    assert not TopicName.is_valid(bad)


def test_error_messages_say_what_is_wrong() -> None:
    with pytest.raises(InvalidTopicName, match="short topic name"):
        TopicName.get("a/b")
    with pytest.raises(InvalidTopicName, match="domain 'http'"):
        TopicName.get("http://t/ns/x")
    with pytest.raises(InvalidTopicName, match="invalid tenant name 't!'"):
        TopicName.get("persistent://t!/ns/x")


def test_allowed_name_characters() -> None:
    tn = TopicName.get("persistent://my_T-1=a:b.c/ns.2/any thing%?")
    assert tn.tenant == "my_T-1=a:b.c"
    assert tn.local_name == "any thing%?"


# --- partitions


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("persistent://t/ns/x-partition-0", 0),
        ("persistent://t/ns/x-partition-7", 7),
        ("persistent://t/ns/x-partition-2147483647", 2147483647),
        ("persistent://t/ns/x-partition-2147483648", -1),  # overflows int32
        ("persistent://t/ns/x-partition-01", -1),  # leading zero: Java says -1
        ("persistent://t/ns/x-partition--2", -1),  # negative
        ("persistent://t/ns/x-partition-+2", -1),
        ("persistent://t/ns/x-partition-", -1),
        ("persistent://t/ns/x-partition-a", -1),
        ("persistent://t/ns/a-partition-1-partition-3", 3),  # after the last suffix
        ("persistent://t/ns/x", -1),
    ],
)
def test_partition_index(name: str, index: int) -> None:
    tn = TopicName.get(name)
    assert tn.partition_index == index
    assert tn.is_partitioned == (index >= 0)


def test_partition_names_and_base() -> None:
    base = TopicName.get("t/ns/orders")
    p3 = base.get_partition(3)
    assert str(p3) == "persistent://t/ns/orders-partition-3"
    assert p3.partition_index == 3
    assert p3.partitioned_topic_name == "persistent://t/ns/orders"
    assert p3.base() == base
    assert p3.get_partition(5) == base.get_partition(5)
    assert p3.get_partition(3) is p3
    assert base.get_partition(-1) is base
    assert base.partitioned_topic_name == str(base)
    nested = TopicName.get("persistent://t/ns/a-partition-1-partition-3")
    assert nested.partitioned_topic_name == "persistent://t/ns/a-partition-1"
    with pytest.raises(InvalidTopicName):
        base.get_partition(-5)


# --- derived forms


def test_persistence_naming_lookup_and_rest_paths() -> None:
    # a '/' in a v2 local name only comes from code (as a string it would read as v1)
    tn = NamespaceName.get("public/default").topic("my topic/é*~")
    assert tn.encoded_local_name == "my+topic%2F%C3%A9*%7E"
    assert tn.persistence_naming == "public/default/persistent/my+topic%2F%C3%A9*%7E"
    assert tn.lookup_name == "persistent/public/default/my+topic%2F%C3%A9*%7E"
    assert tn.rest_path() == tn.lookup_name
    assert tn.rest_path(include_domain=False) == "public/default/my+topic%2F%C3%A9*%7E"
    assert TopicName.from_persistence_naming(tn.persistence_naming) == tn
    v1 = TopicName.get("persistent://t/c/ns/x")
    assert TopicName.from_persistence_naming(v1.persistence_naming) == v1
    with pytest.raises(InvalidTopicName):
        TopicName.from_persistence_naming("t/ns/bogus/x")
    with pytest.raises(InvalidTopicName):
        TopicName.from_persistence_naming("t/ns/x")


@given(st.text(min_size=1).filter(lambda s: s.strip()))
def test_local_name_encoding_round_trips(local: str) -> None:
    try:
        local.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates cannot be names on the wire
    encoded = encode_local_name(local)
    assert "/" not in encoded and " " not in encoded
    assert decode_local_name(encoded) == local


# --- namespaces


def test_namespace_names() -> None:
    ns = NamespaceName.get("t/ns")
    assert (ns.tenant, ns.local_name, ns.cluster, ns.is_v2) == ("t", "ns", None, True)
    assert str(ns) == "t/ns"
    v1 = NamespaceName.get("t/c/ns")
    assert (v1.cluster, v1.is_v2, str(v1)) == ("c", False, "t/c/ns")
    assert NamespaceName.get("t/global/ns").is_global and not v1.is_global
    assert str(ns.topic("x", TopicDomain.NON_PERSISTENT)) == "non-persistent://t/ns/x"
    for bad in ["t", "t/", "/ns", "t/ns/x/y", "t/n s", "t!/ns", ""]:
        with pytest.raises(InvalidNamespaceName):
            NamespaceName.get(bad)
        assert not NamespaceName.is_valid(bad)


# --- system topics (reference §10, second table)


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("persistent://public/default/__change_events", True),
        ("persistent://public/default/__change_events-partition-0", True),
        ("persistent://t/ns/__transaction_buffer_snapshot", True),
        ("persistent://t/ns/my-topic-my-sub__transaction_pending_ack", True),
        ("persistent://pulsar/system/transaction_coordinator_assign-partition-0", True),
        ("persistent://pulsar/system/__transaction_log_0", True),
        ("non-persistent://pulsar/system/resource-usage", True),
        ("persistent://pulsar/standalone/127.0.0.1:8080/healthcheck", True),
        ("persistent://pulsar/127.0.0.1:8080/healthcheck", True),
        ("persistent://public/default/my-topic", False),
        ("persistent://public/default/change_events", False),
        ("persistent://pulsar/other/x", False),
    ],
)
def test_system_topics(name: str, system: bool) -> None:
    assert TopicName.get(name).is_system_topic == system


def test_system_namespace() -> None:
    assert SYSTEM_NAMESPACE == NamespaceName.get("pulsar/system")
    assert SYSTEM_NAMESPACE.is_system
    assert not NamespaceName.get("public/default").is_system


def test_names_are_frozen_and_hashable() -> None:
    tn = TopicName.get("x")
    assert {tn: 1}[TopicName.get("persistent://public/default/x")] == 1
    with pytest.raises(AttributeError):
        tn.tenant = "other"  # type: ignore[misc]
