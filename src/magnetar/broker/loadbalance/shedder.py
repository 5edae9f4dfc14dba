"""Shedding: Pulsar's ThresholdShedder, and the moves it plans for one round.

Theory of operation: each round the leader calls :func:`plan_shedding` with a
fresh :class:`~.placement.ClusterView` and its :class:`ShedderState`.

* Every live broker's usage (the weighted max resource usage of its report) is
  smoothed into a history: ``h = p * h + (1 - p) * current`` with
  ``p = loadBalancerHistoryResourcePercentage`` (the first report counts in full);
  a broker that left is forgotten.
* ``avg`` is the mean history usage.  A broker above ``avg + threshold``
  (``loadBalancerBrokerThresholdShedderPercentage`` points) is overloaded and
  should offload ``usage - avg - threshold + 5`` points, i.e. that share of its
  usage, taken as the same share of its message throughput (in + out).  If that
  throughput is below ``loadBalancerBundleUnloadMinThroughputThreshold`` MB/s the
  broker is left alone (minimum traffic), as is a broker with a single bundle.
* With ``lowerBoundarySheddingEnabled`` and nobody overloaded, a broker below
  ``avg - threshold`` (one that just joined) makes the busiest broker offload
  ``min(max - avg, avg - min)`` points, so a new broker receives bundles.
* Its bundles are taken largest throughput first, skipping those moved within
  ``loadBalancerSheddingGracePeriodMinutes`` (no flapping: a bundle moved once stays
  put for the grace period), until the throughput to offload is covered.
* Each chosen bundle gets a destination from :func:`~.placement.select_broker`
  (isolation and anti-affinity hold; the source excluded).  A move is kept only
  when it helps: the destination must stay at or below ``avg + threshold`` after
  it, and below the source.  The move is applied to the view and to the history
  (the shifted share of usage leaves the source), so later choices of the round,
  and the next round before fresh reports arrive, see it.

Every broker and bundle considered yields a :class:`~.data.Decision` -- ``unload``
with its destination, or ``skip`` with the reason -- for the log and the stats.
No I/O: the leader (``manager``) carries the unloads out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.loadbalance.data import Decision
from magnetar.broker.loadbalance.placement import ClusterView, select_broker

ADDITIONAL_MARGIN_PCT = 5.0


@dataclass
class ShedderState:
    history: dict[str, float] = field(default_factory=dict)  # broker -> smoothed usage (0..1)
    unloaded_at: dict[str, int] = field(default_factory=dict)  # bundle -> ms of its last shed move

    def observe(self, view: ClusterView, keep: float) -> None:
        for b in list(self.history):
            if b not in view.reports:
                del self.history[b]
        for b in view.brokers:
            cur = view.reports[b].usage(view.weights)
            old = self.history.get(b)
            self.history[b] = cur if old is None else keep * old + (1.0 - keep) * cur
        view.usage_estimate.update(self.history)

    def forget_before(self, cutoff_ms: int) -> None:
        for bundle in [b for b, t in self.unloaded_at.items() if t < cutoff_ms]:
            del self.unloaded_at[bundle]


def plan_shedding(
    view: ClusterView, state: ShedderState, cfg: LoadBalancerConfig, now_ms: int
) -> list[Decision]:
    state.observe(view, cfg.history_resource_pct)
    state.forget_before(now_ms - cfg.grace_period_ms)
    if len(view.brokers) < 2:
        return []
    avg = sum(state.history[b] for b in view.brokers) / len(view.brokers)
    limit = avg + cfg.threshold_shedder_pct / 100.0
    out: list[Decision] = []
    targets: list[tuple[str, float, str]] = []  # (broker, share of its traffic to offload, why)
    for src in sorted(view.brokers, key=lambda b: (-state.history[b], b)):
        usage = state.history[src]
        if usage <= limit:
            break
        share = min(1.0, (usage - limit + ADDITIONAL_MARGIN_PCT / 100.0) / usage)
        why = f"{src} usage {usage:.1%} > avg {avg:.1%} + threshold {cfg.threshold_shedder_pct:g}%"
        targets.append((src, share, why))
    for src, share, why in targets:
        _offload(view, state, cfg, now_ms, limit, src, share, why, out)
    if cfg.lower_boundary_shedding_enabled and not any(d.kind == "unload" for d in out):
        top = max(view.brokers, key=lambda b: (state.history[b], b))
        low = min(state.history[b] for b in view.brokers)
        usage = state.history[top]
        if low < avg - cfg.threshold_shedder_pct / 100.0 and usage > avg and usage > 0:
            share = min(usage - avg, avg - low) / usage
            why = (
                f"a broker at {low:.1%} < avg {avg:.1%} - threshold {cfg.threshold_shedder_pct:g}% "
                f"(lower boundary): {top} at {usage:.1%}"
            )
            _offload(view, state, cfg, now_ms, limit, top, share, why, out)
    return out


def _offload(
    view: ClusterView,
    state: ShedderState,
    cfg: LoadBalancerConfig,
    now_ms: int,
    limit: float,
    src: str,
    share: float,
    why: str,
    out: list[Decision],
) -> None:
    """Picks ``src``'s bundles (largest first) worth ``share`` of its traffic and their destinations."""
    usage = state.history[src]
    report = view.reports[src]
    bundles = {n: bl for n, bl in report.bundles.items() if view.owner.get(n) == src}
    if len(bundles) <= 1:
        out.append(_skip(src, f"{why} but only {len(bundles)} bundle", now_ms))
        return
    total = sum(bl.throughput for bl in bundles.values())
    to_offload = total * share
    if to_offload < cfg.unload_min_throughput_mb * 1e6:
        out.append(
            _skip(
                src,
                f"{why} but {to_offload / 1e6:.3f} MB/s to offload < minimum "
                f"{cfg.unload_min_throughput_mb:g} MB/s",
                now_ms,
            )
        )
        return
    offloaded = 0.0
    for name, bl in sorted(bundles.items(), key=lambda kv: (-kv[1].throughput, kv[0])):
        if offloaded >= to_offload:
            break
        if name in state.unloaded_at:
            continue  # moved within the grace period
        if bl.throughput <= 0:
            continue
        delta = usage * bl.throughput / total  # this bundle's share of the broker's usage
        placed = select_broker(
            name,
            view,
            overloaded_pct=cfg.overloaded_threshold_pct,
            band_pct=cfg.placement_band_pct,
            exclude=(src,),
            now_ms=now_ms,
        )
        dst = placed.destination
        if dst is None:
            out.append(Decision("skip", name, f"no destination: {placed.reason}", source=src, at_ms=now_ms))
            continue
        after_dst = view.usage(dst) + delta
        after_src = view.usage(src) - delta
        if after_dst > limit or after_dst >= after_src:
            continue  # this bundle is too big for the room the others have: try a smaller one
        reason = (
            f"{why}: offloading {bl.throughput / 1e6:.3f} of {to_offload / 1e6:.3f} MB/s; "
            f"destination {placed.reason}"
        )
        out.append(Decision("unload", name, reason, source=src, destination=dst, at_ms=now_ms))
        view.move(name, dst, delta)
        state.history[src] = max(0.0, state.history[src] - delta)
        state.history[dst] = state.history.get(dst, 0.0) + delta
        state.unloaded_at[name] = now_ms
        offloaded += bl.throughput


def _skip(broker: str, reason: str, now_ms: int) -> Decision:
    return Decision("skip", None, reason, source=broker, at_ms=now_ms)
