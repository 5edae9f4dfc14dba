"""Automatic bundle split: which bundles are too hot, and where to cut them.

Theory of operation: :func:`bundles_to_split` applies Pulsar's thresholds to
every bundle of the reports (``loadBalancerNamespaceBundleMaxTopics``,
``...MaxSessions`` = producers + consumers, ``...MaxMsgRate`` = in + out,
``...MaxBandwidthMbytes`` = throughput in + out): a bundle over any of them is
split, unless it has a single topic (nothing to separate) or its namespace
already has ``loadBalancerNamespaceMaximumBundles`` bundles (counting the
splits decided this round).  Each decision's reason names the threshold.

The cut (:func:`split_point`): ``range_equally_divide`` halves the hash range;
``topic_count_equally_divide`` cuts between the two middle topic hashes of the
bundle so each half gets half of its topics (falling back to the middle of the
range when the topics cannot be separated).  :func:`split_boundaries_at` puts the
cut into a namespace's boundary list.  No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from magnetar.broker.loadbalance.config import SPLIT_ALGORITHMS, LoadBalancerConfig
from magnetar.broker.loadbalance.data import BundleLoad, Decision, namespace_of
from magnetar.broker.ownership.bundles import BundleError, require_range


def bundles_to_split(
    bundles: Mapping[str, BundleLoad],
    bundle_counts: Mapping[str, int],
    cfg: LoadBalancerConfig,
    now_ms: int = 0,
) -> list[Decision]:
    """``bundles``: bundle name -> its load; ``bundle_counts``: namespace -> how many bundles."""
    counts = dict(bundle_counts)
    out = []
    for name, bl in sorted(bundles.items()):
        why = _over(bl, cfg)
        if why is None:
            continue
        ns = namespace_of(name)
        if bl.topics < 2:
            out.append(
                Decision("skip", name, f"{why} but it has {bl.topics} topic: cannot split", at_ms=now_ms)
            )
            continue
        n = counts.get(ns, 1)
        if n >= cfg.max_bundles:
            out.append(
                Decision(
                    "skip", name, f"{why} but {ns} has {n} bundles (maximum {cfg.max_bundles})", at_ms=now_ms
                )
            )
            continue
        counts[ns] = n + 1
        out.append(Decision("split", name, f"{why}; algorithm {cfg.split_algorithm}", at_ms=now_ms))
    return out


def _over(bl: BundleLoad, cfg: LoadBalancerConfig) -> str | None:
    if bl.topics > cfg.bundle_max_topics:
        return f"{bl.topics} topics > {cfg.bundle_max_topics}"
    if bl.sessions > cfg.bundle_max_sessions:
        return f"{bl.sessions} sessions > {cfg.bundle_max_sessions}"
    if bl.msg_rate > cfg.bundle_max_msg_rate:
        return f"msg rate {bl.msg_rate:.0f}/s > {cfg.bundle_max_msg_rate:g}/s"
    if bl.throughput > cfg.bundle_max_bandwidth_mb * 1e6:
        return f"bandwidth {bl.throughput / 1e6:.1f} MB/s > {cfg.bundle_max_bandwidth_mb:g} MB/s"
    return None


def split_point(algorithm: str, lower: int, upper: int, topic_hashes: Sequence[int] = ()) -> int:
    """Where to cut ``[lower, upper)``: strictly inside the range."""
    if algorithm not in SPLIT_ALGORITHMS:
        raise BundleError(f"Unsupported namespace bundle split algorithm {algorithm!r}")
    if upper - lower < 2:
        raise BundleError("bundle is too small to split")
    middle = lower + (upper - lower) // 2
    if algorithm == "range_equally_divide":
        return middle
    hashes = sorted({h for h in topic_hashes if lower <= h <= upper})
    if len(hashes) < 2:
        return middle
    half = len(hashes) // 2
    a, b = hashes[half - 1], hashes[half]
    cut = a + (b - a + 1) // 2  # a < cut <= b: a stays low, b goes high
    return min(max(cut, lower + 1), upper - 1)


def split_boundaries_at(boundaries: list[int], bundle_range: str, point: int) -> list[int]:
    r = require_range(boundaries, bundle_range)
    if not r.lower < point < r.upper:
        raise BundleError(f"split point 0x{point:08x} is outside bundle {bundle_range}")
    return sorted({*boundaries, point})
