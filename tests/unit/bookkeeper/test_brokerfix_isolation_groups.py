"""Bookie isolation groups: which bookies an isolated ledger may not use (Pulsar's rules)."""

from __future__ import annotations

from magnetar.bookkeeper.isolation import excluded_bookies, groups_of, placement_config

GROUPS = {"g1": {"b1": {}, "b2": {}}, "g2": {"b3": {}}, "g3": {"b4": {}}}
ALL = ["b1", "b2", "b3", "b4", "b5"]  # b5 is in no group


def test_other_groups_are_excluded_ungrouped_bookies_are_not() -> None:
    assert excluded_bookies(GROUPS, ["g1"], [], ALL, 2) == {"b3", "b4"}
    assert excluded_bookies(GROUPS, ["g1", "g2"], [], ALL, 2) == {"b4"}


def test_secondary_groups_only_when_the_primary_is_short() -> None:
    assert excluded_bookies(GROUPS, ["g1"], ["g2"], ALL, 2) == {"b3", "b4"}
    assert excluded_bookies(GROUPS, ["g1"], ["g2"], ALL, 3) == {"b4"}
    assert excluded_bookies(GROUPS, ["g1"], ["g2"], ["b1", "b3", "b4"], 2) == {"b4"}  # b2 not available
    assert excluded_bookies(GROUPS, ["nope"], [], ALL, 1) == {"b1", "b2", "b3", "b4"}


def test_placement_config_round_trip() -> None:
    cfg = placement_config(["g1", "g2"], ["g3"])
    assert groups_of(cfg) == (["g1", "g2"], ["g3"])
    assert groups_of(b"") is None and groups_of(b"not json") is None
    assert groups_of(placement_config([], [])) is None
