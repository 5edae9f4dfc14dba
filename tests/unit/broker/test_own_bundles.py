"""Bundles: Pulsar's boundaries, topic hash (crc32 of the full name), split, names."""

from __future__ import annotations

import zlib

import pytest

from magnetar.broker.ownership.bundles import (
    BundleError,
    BundleRange,
    boundaries_of,
    bundle_of_topic,
    even_boundaries,
    split_boundaries,
    to_hex,
    topic_hash,
)
from magnetar.broker.ownership.placement import choose_broker
from magnetar.broker.ownership.registry import BrokerInfo
from magnetar.broker.resources.namespaces import bundle_boundaries


def test_even_boundaries_match_pulsar_and_the_namespace_resource():
    assert to_hex(even_boundaries(4)) == [
        "0x00000000",
        "0x40000000",
        "0x80000000",
        "0xc0000000",
        "0xffffffff",
    ]
    for n in (1, 3, 16):
        assert to_hex(even_boundaries(n)) == bundle_boundaries(n)


def test_topic_hash_is_crc32_of_the_full_name():
    name = "persistent://public/default/my-topic-partition-3"
    assert topic_hash(name) == zlib.crc32(name.encode())
    # A known value (Guava's Hashing.crc32 agrees with zlib's CRC-32).
    assert topic_hash("persistent://pulsar/use/ns1/topic-1") == zlib.crc32(
        b"persistent://pulsar/use/ns1/topic-1"
    )


def test_topic_lands_in_the_range_holding_its_hash_last_range_closed():
    bounds = even_boundaries(4)
    for i in range(200):
        name = f"persistent://t/ns/x{i}"
        b = bundle_of_topic("t/ns", bounds, name)
        assert b.range.lower <= topic_hash(name) < b.range.upper
        assert b.name == f"t/ns/{b.range.name}"
    last = BundleRange(0xC0000000, 0xFFFFFFFF)
    assert last.contains(0xFFFFFFFF) and not BundleRange(0, 0x40000000).contains(0x40000000)


def test_boundaries_from_policies_or_the_default_count():
    assert boundaries_of({"bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}}) == [
        0,
        0xFFFFFFFF,
    ]
    assert boundaries_of({}, 2) == [0, 0x80000000, 0xFFFFFFFF]


def test_split_range_equally_divide():
    bounds = even_boundaries(2)
    assert to_hex(split_boundaries(bounds, "0x00000000_0x80000000")) == [
        "0x00000000",
        "0x40000000",
        "0x80000000",
        "0xffffffff",
    ]
    assert to_hex(split_boundaries(bounds, "0x80000000_0xffffffff"))[2] == "0xbfffffff"


@pytest.mark.parametrize(
    "name", ["0x00000000", "0x1_0x2_", "zz_0x00000001", "0x00000010_0x00000001", "0x00000000_0x40000000"]
)
def test_bad_bundle_names_are_refused(name):
    with pytest.raises(BundleError):
        split_boundaries(even_boundaries(1), name)


def test_unknown_split_algorithm_is_refused():
    with pytest.raises(BundleError, match="Unsupported"):
        split_boundaries(even_boundaries(1), "0x00000000_0xffffffff", "topic_count_equally_divide")


def test_placement_picks_the_least_loaded_and_spreads_ties():
    brokers = [BrokerInfo(f"b{i}:8080", f"http://b{i}:8080", num_bundles=n) for i, n in enumerate((3, 1, 2))]
    assert choose_broker("t/ns/0x00000000_0x40000000", brokers).broker_id == "b1:8080"
    assert choose_broker("x", brokers, avoid="b1:8080").broker_id == "b2:8080"
    idle = [BrokerInfo(f"b{i}:8080", f"http://b{i}:8080") for i in range(3)]
    chosen = {choose_broker(f"t/ns/{r}", idle).broker_id for r in range(64)}
    assert len(chosen) == 3
    assert choose_broker("x", []) is None
