"""The load manager's pure decisions: placement, isolation, anti-affinity, shedding, split."""

from __future__ import annotations

import pytest

from magnetar.broker.config import ConfigError
from magnetar.broker.loadbalance.api import LoadManagerError, load_manager_kind
from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.loadbalance.data import BundleLoad, LoadReport, ResourceUsage
from magnetar.broker.loadbalance.placement import (
    ClusterView,
    isolation_policies_from_doc,
    select_broker,
    violations,
)
from magnetar.broker.loadbalance.shedder import ShedderState, plan_shedding
from magnetar.broker.loadbalance.split import bundles_to_split, split_boundaries_at, split_point
from magnetar.broker.ownership.bundles import BundleError

MB = 1e6
LIMIT = 100 * MB  # bandwidth limit: usage % = MB/s


def rep(broker: str, bundles: dict[str, float], cpu: float = 0.0) -> LoadReport:
    """A report whose bandwidth-in usage is the sum of its bundles' MB/s (limit 100 MB/s)."""
    loads = {
        n: BundleLoad(msg_rate_in=mb * 10, throughput_in=mb * MB, topics=3, producers=1)
        for n, mb in bundles.items()
    }
    total = sum(bundles.values()) * MB
    return LoadReport(
        broker,
        cpu=ResourceUsage(cpu, 100.0),
        bandwidth_in=ResourceUsage(total, LIMIT),
        bundles=loads,
    )


def cfg(**kw: object) -> LoadBalancerConfig:
    base = {
        "loadBalancerBundleUnloadMinThroughputThreshold": "0",
        "loadBalancerHistoryResourcePercentage": "0",
    }
    return LoadBalancerConfig.from_properties({**base, **{k: str(v) for k, v in kw.items()}})


# ------------------------------------------------------------------ config and report JSON
def test_config_defaults_and_bad_values() -> None:
    c = LoadBalancerConfig.from_properties({})
    assert c.shedding_enabled and c.shedding_interval_s == 60 and c.grace_period_ms == 30 * 60_000
    assert LoadBalancerConfig.from_properties(
        {"loadBalancerSheddingIntervalMinutes": "0.02"}
    ).shedding_interval_s == pytest.approx(1.2)
    with pytest.raises(ConfigError, match="loadBalancerSheddingEnabled"):
        LoadBalancerConfig.from_properties({"loadBalancerSheddingEnabled": "maybe"})
    with pytest.raises(ConfigError, match="defaultNamespaceBundleSplitAlgorithm"):
        LoadBalancerConfig.from_properties({"defaultNamespaceBundleSplitAlgorithm": "nope"})
    with pytest.raises(ConfigError, match="negative"):
        LoadBalancerConfig.from_properties({"loadBalancerNamespaceMaximumBundles": "-1"})


def test_load_manager_kinds() -> None:
    assert load_manager_kind("", True) == "leader"
    assert (
        load_manager_kind("org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl", True)
        == "leader"
    )
    assert load_manager_kind("org.apache.pulsar.broker.loadbalance.NoopLoadManager", True) == "noop"
    assert load_manager_kind("", False) == "noop"
    assert load_manager_kind("my.mod:Manager", True) == "plugin"
    with pytest.raises(LoadManagerError):
        load_manager_kind("org.example.Unknown", True)


def test_report_round_trips_in_pulsar_field_names() -> None:
    r = rep("h:1", {"t/n/0x00000000_0x80000000": 5, "t/n/0x80000000_0xffffffff": 7}, cpu=30)
    doc = r.to_json_dict()
    assert doc["bandwidthIn"] == {"usage": 12 * MB, "limit": LIMIT}
    assert doc["numBundles"] == 2 and doc["msgThroughputIn"] == 12 * MB
    assert set(doc["lastStats"]) == set(doc["bundles"])
    back = LoadReport.from_json_dict("h:1", doc)
    assert back.usage() == pytest.approx(0.30) and back.throughput_in == 12 * MB
    assert back.changed_enough(r, 10) is False
    assert rep("h:1", {"t/n/0x00000000_0x80000000": 30}).changed_enough(r, 10) is True


# ------------------------------------------------------------------ placement
def test_placement_least_loaded_spreads_a_fresh_namespace() -> None:
    view = ClusterView({b: rep(b, {}) for b in ("a:1", "b:1", "c:1")})
    chosen = []
    for i in range(6):
        d = select_broker(f"t/n/0x{i:08x}_0x{i + 1:08x}", view)
        assert d.destination is not None and "least loaded" in d.reason
        view.move(d.bundle, d.destination, 0.0)
        chosen.append(d.destination)
    assert sorted(chosen.count(b) for b in ("a:1", "b:1", "c:1")) == [2, 2, 2]
    loaded = ClusterView({"a:1": rep("a:1", {"x/y/0x0_0x1": 60}), "b:1": rep("b:1", {"x/y/0x1_0x2": 5})})
    assert select_broker("t/n/0x00000000_0xffffffff", loaded).destination == "b:1"


def test_isolation_primary_then_failover_to_secondary() -> None:
    policies = isolation_policies_from_doc(
        {
            "p1": {
                "namespaces": ["iso/.*"],
                "primary": ["a:1"],
                "secondary": ["b:1"],
                "auto_failover_policy": {
                    "policy_type": "min_available",
                    "parameters": {"min_limit": "1", "usage_threshold": "80"},
                },
            }
        }
    )
    reports = {b: rep(b, {}) for b in ("a:1", "b:1", "c:1")}
    view = ClusterView(dict(reports), policies=policies)
    d = select_broker("iso/ns/0x00000000_0xffffffff", view)
    assert d.destination == "a:1" and "isolation policy p1: primary" in d.reason
    # shared namespaces never land on the primary broker
    for i in range(5):
        assert select_broker(f"open/ns/0x{i:08x}_0x{i + 1:08x}", view).destination in ("b:1", "c:1")
    # the primary dies: failover to the secondary, never to c
    del reports["a:1"]
    d = select_broker("iso/ns/0x00000000_0xffffffff", ClusterView(dict(reports), policies=policies))
    assert d.destination == "b:1" and "failover to secondary" in d.reason
    # the primary is above usage_threshold: not available either
    reports["a:1"] = rep("a:1", {"iso/ns/0x0_0x1": 90})
    assert select_broker("iso/ns/0x1_0x2", ClusterView(dict(reports), policies=policies)).destination == "b:1"
    # no eligible broker at all: no placement, a reason
    lone = ClusterView({"c:1": rep("c:1", {})}, policies=policies)
    d = select_broker("iso/ns/0x1_0x2", lone)
    assert d.destination is None and "no eligible broker" in d.reason


def test_anti_affinity_spreads_a_group() -> None:
    groups = {f"t/ns{i}": "g" for i in range(3)}
    view = ClusterView({b: rep(b, {}) for b in ("a:1", "b:1", "c:1")}, anti_affinity=groups)
    got = set()
    for i in range(3):
        d = select_broker(f"t/ns{i}/0x00000000_0xffffffff", view)
        assert "anti-affinity group g" in d.reason
        view.move(d.bundle, d.destination, 0.0)
        got.add(d.destination)
    assert got == {"a:1", "b:1", "c:1"} and violations(view) == []
    view.owner["t/ns0/0x00000000_0xffffffff"] = view.owner["t/ns1/0x00000000_0xffffffff"]
    assert violations(view)


def test_anti_affinity_with_failure_domains() -> None:
    domains = {"a:1": "d1", "b:1": "d1", "c:1": "d2"}
    view = ClusterView(
        {b: rep(b, {}) for b in domains}, anti_affinity={"t/x": "g", "t/y": "g"}, domains=domains
    )
    view.move("t/x/0x00000000_0xffffffff", "a:1", 0.0)
    assert select_broker("t/y/0x00000000_0xffffffff", view).destination == "c:1"  # not b: same domain


# ------------------------------------------------------------------ shedding
def skewed() -> ClusterView:
    return ClusterView(
        {
            "a:1": rep("a:1", {f"t/n/0x{i:08x}_0x{i + 1:08x}": 8 for i in range(10)}),  # 80 %
            "b:1": rep("b:1", {"t/n/0x000000f0_0x000000f1": 10}),  # 10 %
            "c:1": rep("c:1", {}),
        }
    )


def test_threshold_shedder_moves_the_excess_with_reasons() -> None:
    view, state = skewed(), ShedderState()
    decisions = plan_shedding(view, state, cfg(), now_ms=1000)
    moves = [d for d in decisions if d.kind == "unload"]
    assert moves and all(d.source == "a:1" and d.destination in ("b:1", "c:1") for d in moves)
    assert all("threshold" in d.reason for d in moves)
    # avg is 30 %: a offloads 80 - 40 + 5 (margin) = 45 of its 80 points: six 8 % bundles
    assert len(moves) == 6
    usages = {b: view.usage(b) for b in view.brokers}
    assert max(usages.values()) <= 0.40 + 1e-9
    assert all(state.unloaded_at[d.bundle] == 1000 for d in moves)


def test_shedder_grace_period_and_minimum_traffic_and_single_bundle() -> None:
    view, state = skewed(), ShedderState()
    first = [d.bundle for d in plan_shedding(view, state, cfg(), now_ms=0) if d.kind == "unload"]
    # same (stale) reports again a minute later: the moved bundles are in their grace period
    again = plan_shedding(skewed(), state, cfg(), now_ms=60_000)
    assert not {d.bundle for d in again if d.kind == "unload"} & set(first)
    # minimum traffic: 10 MB/s needed, far less to offload
    tiny = ClusterView({"a:1": rep("a:1", {"t/n/0x0_0x1": 0.5, "t/n/0x1_0x2": 0.5}), "b:1": rep("b:1", {})})
    tiny.reports["a:1"] = LoadReport("a:1", cpu=ResourceUsage(90, 100), bundles=tiny.reports["a:1"].bundles)
    d = plan_shedding(tiny, ShedderState(), cfg(loadBalancerBundleUnloadMinThroughputThreshold=10), 0)
    assert [x.kind for x in d] == ["skip"] and "minimum" in d[0].reason
    one = ClusterView({"a:1": rep("a:1", {"t/n/0x0_0x1": 90}), "b:1": rep("b:1", {})})
    d = plan_shedding(one, ShedderState(), cfg(), 0)
    assert [x.kind for x in d] == ["skip"] and "only 1 bundle" in d[0].reason


def test_shedder_respects_isolation() -> None:
    policies = isolation_policies_from_doc(
        {"p": {"namespaces": ["t/n"], "primary": ["a:1"], "secondary": []}}
    )
    view = skewed()
    view.policies = policies
    decisions = plan_shedding(view, ShedderState(), cfg(), 0)
    assert not [d for d in decisions if d.kind == "unload"]
    assert any("no destination" in d.reason for d in decisions)


def test_balanced_cluster_sheds_nothing() -> None:
    view = ClusterView({b: rep(b, {f"t/{b}/0x0_0x1": 30, f"t/{b}/0x1_0x2": 5}) for b in ("a:1", "b:1")})
    assert plan_shedding(view, ShedderState(), cfg(), 0) == []


# ------------------------------------------------------------------ split
def test_split_decisions_by_each_threshold_and_maximum() -> None:
    c = cfg(
        loadBalancerNamespaceBundleMaxTopics=10,
        loadBalancerNamespaceBundleMaxSessions=10,
        loadBalancerNamespaceBundleMaxMsgRate=100,
        loadBalancerNamespaceBundleMaxBandwidthMbytes=1,
        loadBalancerNamespaceMaximumBundles=3,
    )
    bundles = {
        "t/a/0x0_0x1": BundleLoad(topics=11),
        "t/b/0x0_0x1": BundleLoad(topics=2, producers=6, consumers=5),
        "t/c/0x0_0x1": BundleLoad(topics=2, msg_rate_in=80, msg_rate_out=30),
        "t/d/0x0_0x1": BundleLoad(topics=2, throughput_out=2 * MB),
        "t/e/0x0_0x1": BundleLoad(topics=1, throughput_out=2 * MB),
        "t/f/0x0_0x1": BundleLoad(topics=2),
        "t/g/0x0_0x1": BundleLoad(topics=12),
    }
    out = {d.bundle: d for d in bundles_to_split(bundles, {"t/g": 3}, c)}
    assert out["t/a/0x0_0x1"].kind == "split" and "11 topics > 10" in out["t/a/0x0_0x1"].reason
    assert "sessions" in out["t/b/0x0_0x1"].reason
    assert "msg rate" in out["t/c/0x0_0x1"].reason
    assert "bandwidth" in out["t/d/0x0_0x1"].reason
    assert out["t/e/0x0_0x1"].kind == "skip" and "cannot split" in out["t/e/0x0_0x1"].reason
    assert "t/f/0x0_0x1" not in out
    assert out["t/g/0x0_0x1"].kind == "skip" and "maximum 3" in out["t/g/0x0_0x1"].reason


def test_split_algorithms() -> None:
    assert split_point("range_equally_divide", 0, 100) == 50
    hashes = [1, 2, 3, 90, 91, 92, 93, 94]
    cut = split_point("topic_count_equally_divide", 0, 100, hashes)
    assert sum(h < cut for h in hashes) == 4 and sum(h >= cut for h in hashes) == 4
    assert split_point("topic_count_equally_divide", 0, 100, [5]) == 50
    with pytest.raises(BundleError):
        split_point("nope", 0, 100)
    assert split_boundaries_at([0, 100, 0xFFFFFFFF], "0x00000000_0x00000064", 30) == [0, 30, 100, 0xFFFFFFFF]
    with pytest.raises(BundleError):
        split_boundaries_at([0, 100, 0xFFFFFFFF], "0x00000000_0x00000064", 100)
