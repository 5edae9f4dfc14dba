"""Placement of a bundle on a broker: isolation, anti-affinity, then the least loaded with weights.

Theory of operation: :func:`select_broker` filters the live brokers of a
:class:`ClusterView` in Pulsar's order and returns a :class:`Decision` whose
reason names every filter that bit:

1. **Namespace isolation** (the cluster's ``namespaceIsolationPolicies``): a
   namespace matched by a policy's ``namespaces`` regexes goes to the policy's
   *primary* brokers that are available (usage below the auto-failover
   ``usage_threshold``); when fewer than ``min_limit`` primaries are available
   (``min_available`` policy) the *secondary* brokers join the candidates.
   A namespace no policy matches goes to the *shared* brokers: those no
   policy names as primary.  No candidate left -> no placement (the lookup
   fails; isolation is never broken to place a bundle).
2. **Anti-affinity** (the namespace policy ``antiAffinityGroup``): among the
   candidates keep the failure domains, then the brokers, holding the fewest
   other namespaces of the same group.
3. **Overload**: brokers above ``loadBalancerBrokerOverloadedThresholdPercentage``
   are dropped unless every candidate is overloaded.
4. **Least loaded with weights**: the candidates within
   ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage`` points of the
   lowest weighted usage; among them the fewest bundles, ties broken by a hash of
   bundle and broker (every broker computes the same answer from the same view,
   and the bundles of a fresh namespace spread instead of piling up).

The view is plain data (reports, who owns what, policies) and :meth:`ClusterView.move`
updates it with an estimate of what a move shifts, so the shedder can plan
several moves in one round without dumping them all on one broker.  No I/O.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from magnetar.broker.loadbalance.data import Decision, LoadReport, Weights, namespace_of


@dataclass(frozen=True, slots=True)
class IsolationPolicy:
    name: str
    namespaces: tuple[str, ...]
    primary: tuple[str, ...]
    secondary: tuple[str, ...] = ()
    min_limit: int = 1
    usage_threshold_pct: float = 100.0

    def matches_namespace(self, namespace: str) -> bool:
        return any(_full(rx, namespace) for rx in self.namespaces)

    def is_primary(self, broker: str) -> bool:
        return any(_broker_match(rx, broker) for rx in self.primary)

    def is_secondary(self, broker: str) -> bool:
        return any(_broker_match(rx, broker) for rx in self.secondary)


@functools.lru_cache(maxsize=4096)
def _full(regex: str, text: str) -> bool:
    try:
        return re.fullmatch(regex, text) is not None
    except re.error:
        return False  # stored as given; an invalid pattern matches nothing


def _broker_match(regex: str, broker: str) -> bool:
    """Pulsar matches the broker's host (and operators often write host:port): accept either."""
    return _full(regex, broker) or _full(regex, broker.rsplit(":", 1)[0])


def isolation_policies_from_doc(doc: Mapping | None) -> list[IsolationPolicy]:
    """The cluster's stored ``{name: NamespaceIsolationData}`` map as typed policies."""
    out = []
    for name, data in sorted((doc or {}).items()):
        if not isinstance(data, Mapping):
            continue
        auto = data.get("auto_failover_policy") or {}
        params = auto.get("parameters") or {} if isinstance(auto, Mapping) else {}
        try:
            min_limit = int(params.get("min_limit", 1))
            threshold = float(params.get("usage_threshold", 100))
        except (TypeError, ValueError):
            min_limit, threshold = 1, 100.0
        out.append(
            IsolationPolicy(
                name=str(name),
                namespaces=tuple(data.get("namespaces") or ()),
                primary=tuple(data.get("primary") or ()),
                secondary=tuple(data.get("secondary") or ()),
                min_limit=min_limit,
                usage_threshold_pct=threshold,
            )
        )
    return out


@dataclass
class ClusterView:
    """What the deciding broker knows: live brokers' reports and who owns which bundle."""

    reports: dict[str, LoadReport]
    owner: dict[str, str] = field(default_factory=dict)  # bundle -> broker
    policies: Sequence[IsolationPolicy] = ()
    anti_affinity: Mapping[str, str] = field(default_factory=dict)  # namespace -> group
    domains: Mapping[str, str] = field(default_factory=dict)  # broker -> failure domain
    weights: Weights = Weights()
    usage_estimate: dict[str, float] = field(default_factory=dict)  # broker -> usage (0..1)

    def __post_init__(self) -> None:
        for b, r in self.reports.items():
            self.usage_estimate.setdefault(b, r.usage(self.weights))
            for name in r.bundles:
                self.owner.setdefault(name, b)
        self._counts: dict[str, int] = {}
        for o in self.owner.values():
            self._counts[o] = self._counts.get(o, 0) + 1

    @property
    def brokers(self) -> list[str]:
        return sorted(self.reports)

    def usage(self, broker: str) -> float:
        return self.usage_estimate.get(broker, 0.0)

    def bundle_count(self, broker: str) -> int:
        return self._counts.get(broker, 0)

    def policy_of(self, namespace: str) -> IsolationPolicy | None:
        return next((p for p in self.policies if p.matches_namespace(namespace)), None)

    def set_bundle_counts(self, counts: Mapping[str, int]) -> None:
        """Fresher bundle counts than the reports' (the registrations, updated on every take)."""
        self._counts.update(counts)

    def move(self, bundle: str, destination: str, usage_delta: float) -> None:
        """Record a planned move and shift its estimated usage."""
        source = self.owner.get(bundle)
        if source is not None and source in self.usage_estimate:
            self.usage_estimate[source] = max(0.0, self.usage_estimate[source] - usage_delta)
        self.usage_estimate[destination] = self.usage_estimate.get(destination, 0.0) + usage_delta
        if source is not None:
            self._counts[source] = self._counts.get(source, 1) - 1
        self._counts[destination] = self._counts.get(destination, 0) + 1
        self.owner[bundle] = destination


def isolation_candidates(namespace: str, brokers: Sequence[str], view: ClusterView) -> tuple[list[str], str]:
    policy = view.policy_of(namespace)
    if policy is None:
        shared = [b for b in brokers if not any(p.is_primary(b) for p in view.policies)]
        why = "shared brokers" if view.policies else ""
        return shared, why
    primaries = [b for b in brokers if policy.is_primary(b)]
    available = [b for b in primaries if view.usage(b) * 100.0 < policy.usage_threshold_pct]
    if available and len(available) >= policy.min_limit:
        return available, f"isolation policy {policy.name}: primary"
    secondaries = [b for b in brokers if policy.is_secondary(b) and not policy.is_primary(b)]
    return (
        available + secondaries,
        f"isolation policy {policy.name}: {len(available)} primary available < min_limit "
        f"{policy.min_limit}, failover to secondary",
    )


def anti_affinity_candidates(
    namespace: str, candidates: list[str], view: ClusterView
) -> tuple[list[str], str]:
    group = view.anti_affinity.get(namespace)
    if not group or not candidates:
        return candidates, ""

    def count(broker: str) -> int:
        return len(
            {
                ns
                for bundle, owner in view.owner.items()
                if owner == broker
                and (ns := namespace_of(bundle)) != namespace
                and view.anti_affinity.get(ns) == group
            }
        )

    counts = {b: count(b) for b in view.brokers}
    cands = candidates
    if view.domains:
        by_domain: dict[str, int] = {}
        for b in view.brokers:
            d = view.domains.get(b, f"<broker {b}>")
            by_domain[d] = by_domain.get(d, 0) + counts[b]
        best_d = min(by_domain.get(view.domains.get(b, f"<broker {b}>"), 0) for b in cands)
        cands = [b for b in cands if by_domain.get(view.domains.get(b, f"<broker {b}>"), 0) == best_d]
    best = min(counts[b] for b in cands)
    kept = [b for b in cands if counts[b] == best]
    return kept, f"anti-affinity group {group}: {best} other namespaces of the group there"


def eligible_brokers(
    bundle: str, view: ClusterView, *, exclude: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """The brokers isolation and anti-affinity allow for ``bundle`` (minus ``exclude``), and why."""
    namespace = namespace_of(bundle)
    pool = [b for b in view.brokers if b not in exclude]
    why: list[str] = []
    cands, r = isolation_candidates(namespace, pool, view)
    if r:
        why.append(r)
    cands, r = anti_affinity_candidates(namespace, cands, view)
    if r:
        why.append(r)
    return cands, why


def select_broker(
    bundle: str,
    view: ClusterView,
    *,
    overloaded_pct: float = 85.0,
    band_pct: float = 10.0,
    avoid: str | None = None,
    exclude: Sequence[str] = (),
    now_ms: int = 0,
) -> Decision:
    """Where ``bundle`` should go.  ``avoid``: skipped unless it is the only candidate (a broker
    that just unloaded it); ``exclude``: never chosen (the source of a shedding move)."""
    cands, why = eligible_brokers(bundle, view, exclude=exclude)
    if not cands:
        return Decision("place", bundle, "; ".join([*why, "no eligible broker"]), at_ms=now_ms)
    if avoid is not None and len(cands) > 1:
        cands = [b for b in cands if b != avoid] or cands
    cool = [b for b in cands if view.usage(b) * 100.0 <= overloaded_pct]
    if not cool:
        why.append(f"every candidate above {overloaded_pct:g}% usage")
        cool = cands
    low = min(view.usage(b) for b in cool)
    band = [b for b in cool if view.usage(b) <= low + band_pct / 100.0]
    chosen = min(band, key=lambda b: (view.bundle_count(b), zlib.crc32(f"{bundle}|{b}".encode())))
    why.append(
        f"least loaded of {len(cool)} candidates: usage {view.usage(chosen) * 100:.1f}%, "
        f"{view.bundle_count(chosen)} bundles"
    )
    return Decision("place", bundle, "; ".join(why), destination=chosen, at_ms=now_ms)


def misplaced(bundle: str, broker: str, view: ClusterView) -> str | None:
    """Why ``bundle`` may not stay on ``broker`` by isolation (None when it may): a namespace
    of a policy outside the policy's primary and secondary brokers, or a shared namespace on a
    policy's primary broker."""
    ns = namespace_of(bundle)
    policy = view.policy_of(ns)
    if policy is None:
        named = next((p for p in view.policies if p.is_primary(broker)), None)
        return (
            None if named is None else f"{ns} has no isolation policy and {broker} is primary of {named.name}"
        )
    if policy.is_primary(broker) or policy.is_secondary(broker):
        return None
    return f"isolation policy {policy.name} does not allow {ns} on {broker}"


def plan_isolation_moves(view: ClusterView, *, now_ms: int = 0, **placement: float) -> list[Decision]:
    """Unload decisions for every bundle owned against an isolation policy (a policy set after
    the namespace was placed), each with its destination; ``skip`` when no broker may take it."""
    out = []
    for bundle, broker in sorted(view.owner.items()):
        why = misplaced(bundle, broker, view)
        if why is None:
            continue
        d = select_broker(bundle, view, exclude=(broker,), now_ms=now_ms, **placement)  # type: ignore[arg-type]
        if d.destination is None:
            out.append(Decision("skip", bundle, f"{why}; {d.reason}", source=broker, at_ms=now_ms))
            continue
        out.append(
            Decision(
                "unload",
                bundle,
                f"{why}; destination {d.reason}",
                source=broker,
                destination=d.destination,
                at_ms=now_ms,
            )
        )
        view.move(bundle, d.destination, 0.0)
    return out


def violations(view: ClusterView) -> list[str]:
    """Isolation or anti-affinity broken by the current ownership (the simulation's invariant):
    an isolated namespace outside its primary/secondary brokers, a shared namespace on a
    primary broker, or two namespaces of an anti-affinity group on one broker while another
    eligible broker holds none of the group."""
    out = []
    policy_of = functools.lru_cache(maxsize=None)(view.policy_of)
    isolated = {b for b in set(view.owner.values()) if any(p.is_primary(b) for p in view.policies)}
    for bundle, broker in sorted(view.owner.items()):
        policy = policy_of(namespace_of(bundle))
        if policy is None:
            if broker in isolated:
                out.append(f"{bundle} (no policy) on isolated broker {broker}")
        elif not (policy.is_primary(broker) or policy.is_secondary(broker)):
            out.append(f"{bundle} (policy {policy.name}) on broker {broker} outside it")
    groups: dict[str, set[str]] = {}
    for ns, g in view.anti_affinity.items():
        groups.setdefault(g, set()).add(ns)
    for g, members in groups.items():
        per_broker: dict[str, set[str]] = {}
        for bundle, broker in view.owner.items():
            if namespace_of(bundle) in members:
                per_broker.setdefault(broker, set()).add(namespace_of(bundle))
        if len(members) <= len(view.brokers) and any(len(s) > 1 for s in per_broker.values()):
            shared = {b: sorted(s) for b, s in sorted(per_broker.items()) if len(s) > 1}
            out.append(f"anti-affinity group {g}: {shared}")
    return out
