"""Deterministic simulation of the load manager over many brokers and bundles with skewed load.

Theory of operation: one seed draws a cluster -- 6..12 brokers, 120..300
bundles over a dozen namespaces with Zipf-like loads (MB/s of bandwidth in),
an isolation policy pinning namespace ``iso/pinned`` to a primary broker with
a secondary (``min_available``, ``min_limit`` 1), and an anti-affinity group of
three one-bundle namespaces -- and a timeline of one-minute rounds:

* round 0: only three brokers are up and every bundle is placed on them by
  the real placement (:func:`~magnetar.broker.loadbalance.placement.select_broker`):
  the skew; the other brokers join at round 1 (scale out);
* the isolation primary dies at round ``KILL_AT`` (its bundles, and those of any
  other broker that dies, are placed again: the lookups after a session expiry);
* a hot spot at ``HOT_AT`` (some bundles' load triples); a new broker joins at
  ``JOIN_AT``.

Each round every live broker reports (bandwidth usage = its bundles' load over
the NIC limit, plus seeded noise on CPU), then the real ThresholdShedder
(:func:`~magnetar.broker.loadbalance.shedder.plan_shedding`, Pulsar's default
settings plus ``lowerBoundarySheddingEnabled``; history weight 0.9, or 0 in one
test) plans moves, which are applied: a moved bundle's load follows it.

Checked every round: isolation and anti-affinity never violated
(:func:`~magnetar.broker.loadbalance.placement.violations`); no bundle shed twice
within the grace period (no flapping).  Checked after each disturbance: within
``SETTLE_ROUNDS`` rounds the busiest broker is within ``threshold + 5`` points of
the average (the shedder's own target) and ``max / avg <= RATIO_BOUND``; and in
the quiet rounds at the end nothing moves.  Everything is seeded: a seed replays
exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.loadbalance.data import BundleLoad, LoadReport, ResourceUsage
from magnetar.broker.loadbalance.placement import (
    ClusterView,
    isolation_policies_from_doc,
    select_broker,
    violations,
)
from magnetar.broker.loadbalance.shedder import ShedderState, plan_shedding

MB = 1e6
KILL_AT, HOT_AT, JOIN_AT, ROUNDS = 30, 50, 70, 100
SETTLE_ROUNDS = 15
QUIET_ROUNDS = 8  # the last rounds: no move at all
RATIO_BOUND = 1.45


@dataclass
class LoadSimReport:
    seed: int
    brokers: int = 0
    bundles: int = 0
    moves: int = 0
    rounds_to_settle: dict[str, int] = field(default_factory=dict)
    worst_ratio: dict[str, float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def describe(self) -> str:
        lines = [
            f"seed {self.seed}: {self.brokers} brokers, {self.bundles} bundles, {self.moves} moves",
            f"  rounds to settle: {self.rounds_to_settle}",
            f"  max/avg after settling: { {k: round(v, 3) for k, v in self.worst_ratio.items()} }",
            f"  counters: {self.counters}",
        ]
        lines += [f"  VIOLATION: {v}" for v in self.violations[:20]]
        return "\n".join(lines)


class LoadSim:
    def __init__(self, seed: int, history: float = 0.9) -> None:
        self.rng = random.Random(seed)
        self.report = LoadSimReport(seed)
        self.cfg = LoadBalancerConfig(history_resource_pct=history, lower_boundary_shedding_enabled=True)
        self.limit = self.cfg.bandwidth_limit_bytes_s
        n_brokers = self.rng.randint(6, 12)
        self.all_brokers = [f"broker-{i}:8080" for i in range(n_brokers)]
        self.live = self.all_brokers[:3]
        self.pending = self.all_brokers[3:]
        self.late = f"broker-{n_brokers}:8080"
        self.primary, self.secondary = self.all_brokers[0], self.all_brokers[1]
        self.policies = isolation_policies_from_doc(
            {
                "pin": {
                    "namespaces": ["iso/pinned"],
                    "primary": [self.primary.split(":")[0]],
                    "secondary": [self.secondary],
                    "auto_failover_policy": {
                        "policy_type": "min_available",
                        "parameters": {"min_limit": "1", "usage_threshold": "100"},
                    },
                }
            }
        )
        self.anti = {f"aa/svc{i}": "replicas" for i in range(3)}
        self.load: dict[str, float] = {}  # bundle -> bytes/s
        self.owner: dict[str, str] = {}
        self.state = ShedderState()
        self.shed_times: dict[str, list[int]] = {}
        self._make_bundles()
        self.report.brokers = n_brokers + 1
        self.report.bundles = len(self.load)

    def _make_bundles(self) -> None:
        n = self.rng.randint(120, 300)
        namespaces = [f"t{i}/ns" for i in range(10)]
        # average ~45 % per broker once spread over everyone: total = 0.45 * limit * brokers
        target = 0.45 * self.limit * (len(self.all_brokers) - 1)
        raw = [1.0 / (1 + i) ** 0.8 for i in range(n)]
        self.rng.shuffle(raw)
        scale = target / sum(raw)
        for i, w in enumerate(raw):
            ns = namespaces[i % len(namespaces)]
            self.load[f"{ns}/0x{i:08x}_0x{i + 1:08x}"] = min(w * scale, 0.06 * self.limit)
        for i in range(3):
            self.load[f"iso/pinned/0x{i:08x}_0x{i + 1:08x}"] = 0.02 * self.limit
        for ns in self.anti:
            self.load[f"{ns}/0x00000000_0xffffffff"] = 0.03 * self.limit

    # ------------------------------------------------------------------ the cluster's view
    def view(self) -> ClusterView:
        reports = {}
        per_broker: dict[str, dict[str, BundleLoad]] = {b: {} for b in self.live}
        for n, o in self.owner.items():
            if o in per_broker:
                per_broker[o][n] = BundleLoad(throughput_in=self.load[n], topics=4)
        for b in self.live:
            mine = per_broker[b]
            total = sum(bl.throughput_in for bl in mine.values())
            cpu = min(100.0, 100.0 * total / self.limit * 0.6 + self.rng.uniform(0, 3))
            reports[b] = LoadReport(
                b, cpu=ResourceUsage(cpu, 100.0), bandwidth_in=ResourceUsage(total, self.limit), bundles=mine
            )
        owner = {n: o for n, o in self.owner.items() if o in reports}
        return ClusterView(reports, owner=owner, policies=self.policies, anti_affinity=self.anti)

    def place_unowned(self, now_ms: int) -> None:
        view = self.view()
        for name in sorted(n for n in self.load if self.owner.get(n) not in self.live):
            d = select_broker(name, view, now_ms=now_ms)
            if d.destination is None:
                self.report.violations.append(f"round {now_ms // 60_000}: {name} unplaceable: {d.reason}")
                continue
            view.move(name, d.destination, 0.0)
            self.owner[name] = d.destination
            self._count("placements")

    def _count(self, k: str) -> None:
        self.report.counters[k] = self.report.counters.get(k, 0) + 1

    def usages(self) -> dict[str, float]:
        out = {b: 0.0 for b in self.live}
        for n, o in self.owner.items():
            if o in out:
                out[o] += self.load[n] / self.limit
        return out

    def balanced(self) -> tuple[bool, float]:
        u = self.usages()
        pool = [b for b in self.live if b != self.primary]  # the pinned broker may only hold its namespace
        avg = sum(u[b] for b in pool) / len(pool)
        worst = max(u[b] for b in pool)
        ratio = worst / avg if avg > 0 else 1.0
        ok = worst <= avg + (self.cfg.threshold_shedder_pct + 5.0) / 100.0 and ratio <= RATIO_BOUND
        return ok, ratio

    def _ratio_before(self, view: ClusterView) -> float:
        u = [r.usage(view.weights) for b, r in view.reports.items() if b != self.primary]
        return max(u) / (sum(u) / len(u))

    # ------------------------------------------------------------------ the run
    def run(self) -> LoadSimReport:
        self.place_unowned(0)
        since, phase = 0, "scale-out"
        for rnd in range(1, ROUNDS + 1):
            now = rnd * 60_000
            if rnd == 1:
                self.live += self.pending
            if rnd == KILL_AT:
                self.live.remove(self.primary)
                self._count("kills")
                self.place_unowned(now)
                since, phase = rnd, "broker-killed"
            if rnd == HOT_AT:
                for n in self.rng.sample(sorted(self.load), 5):
                    self.load[n] = min(self.load[n] * 3, 0.06 * self.limit)
                since, phase = rnd, "hot-spot"
            if rnd == JOIN_AT:
                self.live.append(self.late)
                since, phase = rnd, "broker-joined"
            view = self.view()
            for d in plan_shedding(view, self.state, self.cfg, now):
                if d.kind != "unload":
                    self._count("skips")
                    continue
                assert d.bundle is not None and d.destination is not None
                times = self.shed_times.setdefault(d.bundle, [])
                if times and now - times[-1] < self.cfg.grace_period_ms:
                    self.report.violations.append(
                        f"round {rnd}: {d.bundle} shed again {(now - times[-1]) // 60_000} min after"
                    )
                times.append(now)
                self.owner[d.bundle] = d.destination
                self.report.moves += 1
                if rnd > ROUNDS - QUIET_ROUNDS:
                    self.report.violations.append(
                        f"round {rnd}: {d.bundle} moved in the quiet rounds ({d.reason})"
                    )
            if rnd == 1:
                self.report.worst_ratio["skew-before-shedding"] = self._ratio_before(view)
            if rnd == JOIN_AT + SETTLE_ROUNDS and not any(o == self.late for o in self.owner.values()):
                self.report.violations.append(
                    f"round {rnd}: the broker that joined at {JOIN_AT} got no bundle"
                )
            if rnd == KILL_AT:
                pinned = {o for n, o in self.owner.items() if n.startswith("iso/pinned/")}
                if pinned != {self.secondary}:
                    self.report.violations.append(
                        f"round {rnd}: pinned namespace on {pinned} after its primary died"
                    )
                self._count("failovers-to-secondary")
            for v in violations(self.view()):
                self.report.violations.append(f"round {rnd}: {v}")
            ok, ratio = self.balanced()
            if phase not in self.report.rounds_to_settle and ok:
                self.report.rounds_to_settle[phase] = rnd - since
            if phase in self.report.rounds_to_settle:
                self.report.worst_ratio[phase] = max(self.report.worst_ratio.get(phase, 0.0), ratio)
            elif rnd - since > SETTLE_ROUNDS:
                self.report.violations.append(
                    f"round {rnd}: {phase} not settled after {SETTLE_ROUNDS} rounds: {ratio:.2f}"
                )
                self.report.rounds_to_settle[phase] = -1
        return self.report


def run_load_seed(seed: int, history: float = 0.9) -> LoadSimReport:
    return LoadSim(seed, history).run()
