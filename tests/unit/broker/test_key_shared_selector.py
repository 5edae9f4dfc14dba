"""Key_Shared selectors: consistent hashing, legacy split ranges, STICKY ranges, sticky keys."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pytest

from magnetar.broker import errors
from magnetar.broker.service.key_shared_selector import (
    ConsistentHashingSelector,
    SplitRangeSelector,
    StickyRangeSelector,
)
from magnetar.common.murmur3 import NONE_KEY, pulsar_hash, sticky_key_slot
from magnetar.proto import PulsarApi_pb2 as pb
from magnetar.protocol.payload import sticky_key


@dataclass(eq=False)
class C:
    consumer_name: str
    key_shared_ranges: list[tuple[int, int]] = field(default_factory=list)


def test_sticky_key_precedence():
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    assert sticky_key(md) == NONE_KEY
    md.partition_key = base64.b64encode(b"\x00\x01").decode()
    assert sticky_key(md) == md.partition_key.encode()
    md.partition_key_b64_encoded = True
    assert sticky_key(md) == b"\x00\x01"
    md.ordering_key = b"ord"
    assert sticky_key(md) == b"ord"


def test_consistent_hashing_points_and_ring_wrap():
    sel = ConsistentHashingSelector(points=100)
    a, b = C("a"), C("b")
    sel.add_consumer(a)
    assert all(sel.select(s) is a for s in (0, 1, 30000, 65535))
    sel.add_consumer(b)
    points_b = {pulsar_hash(f"b\0{i}".encode()) % 65536 for i in range(100)}
    for p in points_b:
        if sel.select(p) is not b:  # a collision keeps the first consumer
            assert p in {pulsar_hash(f"a\0{i}".encode()) % 65536 for i in range(100)}
    ranges = sel.ranges()
    covered = sorted(r for rs in ranges.values() for r in rs)
    assert covered[0][0] == 0 and covered[-1][1] == 65535
    assert sum(e - s + 1 for s, e in covered) == 65536
    for consumer, rs in ranges.items():
        for s, e in rs:
            assert sel.select(s) is consumer and sel.select(e) is consumer
    # Removing b gives every slot back to a; only b's slots had moved.
    before = {s: sel.select(s) for s in range(0, 65536, 97)}
    sel.remove_consumer(b)
    for s, owner in before.items():
        assert sel.select(s) is a
        if owner is a:
            continue


def test_consistent_hashing_moves_few_slots_on_join():
    sel = ConsistentHashingSelector()
    cs = [C(f"c{i}") for i in range(5)]
    for c in cs:
        sel.add_consumer(c)
    slots = [sticky_key_slot(f"key-{i}") for i in range(2000)]
    before = [sel.select(s) for s in slots]
    newcomer = C("c5")
    sel.add_consumer(newcomer)
    after = [sel.select(s) for s in slots]
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b is not a]
    assert moved and all(a is newcomer for _b, a in moved)
    assert len(moved) < len(slots) / 3


def test_split_range_halves_the_largest():
    sel = SplitRangeSelector()
    a, b, c = C("a"), C("b"), C("c")
    sel.add_consumer(a)
    assert sel.ranges() == {a: [(0, 65535)]}
    sel.add_consumer(b)
    assert sel.ranges() == {b: [(0, 32767)], a: [(32768, 65535)]}
    sel.add_consumer(c)
    assert sel.ranges()[c] == [(0, 16383)]
    sel.remove_consumer(a)  # the top range goes to the range below
    assert sel.select(65535) is b and sel.select(40000) is b
    sel.remove_consumer(c)
    assert sel.select(0) is b


def test_sticky_ranges_and_overlap_refused():
    sel = StickyRangeSelector()
    a = C("a", [(0, 99), (200, 299)])
    sel.add_consumer(a)
    assert sel.select(50) is a and sel.select(150) is None and sel.select(299) is a
    with pytest.raises(errors.ConsumerAssignError):
        sel.add_consumer(C("b", [(250, 400)]))
    with pytest.raises(errors.ConsumerAssignError):
        sel.add_consumer(C("b", [(90, 100)]))
    with pytest.raises(errors.ConsumerAssignError):
        sel.add_consumer(C("b", [(60000, 70000)]))
    b = C("b", [(100, 199)])
    sel.add_consumer(b)
    assert sel.select(150) is b
    sel.remove_consumer(a)
    assert sel.select(50) is None and sel.ranges() == {b: [(100, 199)]}
