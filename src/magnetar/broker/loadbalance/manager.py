"""The leader-based load manager: publish reports everywhere, shed and split on the leader.

Theory of operation (one per broker, owned by the cluster namespace service):

* **Reports** (every broker): every ``loadBalancerReportUpdateMinIntervalMillis``
  the :class:`~.reporter.LoadReporter` computes this broker's report; it is
  *published* -- written into the broker's registration node
  ``/loadbalance/brokers/{id}`` (LocalBrokerData's fields next to the URLs) --
  when it differs from the last published one by
  ``loadBalancerReportUpdateThresholdPercentage`` or the last is older than
  ``loadBalancerReportUpdateMaxIntervalMinutes``.
* **Placement** (the broker a lookup of an unowned bundle reaches):
  :meth:`select_broker` builds a view from the published reports (the
  registrations' bundle counts, fresher, break ties) and the cluster's isolation
  policies, failure domains and the namespaces' ``antiAffinityGroup``, and runs
  :func:`~.placement.select_broker`.  Every broker computes the same answer from
  the same view, so placement needs no extra hop to the leader.
* **Leader round** (the broker elected on ``/loadbalance/leader``, every
  ``loadBalancerSheddingIntervalMinutes``): bundles owned against an isolation
  policy are moved (:func:`~.placement.plan_isolation_moves`); with
  ``loadBalancerSheddingEnabled`` the ThresholdShedder plans moves
  (:func:`~.shedder.plan_shedding`); each move is an unload through the existing
  path with ``destinationBroker`` (the owner's admin API, or our own namespace
  service when we own the bundle), so the next lookup places the bundle where the
  leader decided.  With ``loadBalancerAutoBundleSplitEnabled`` hot bundles are
  split on their owner (``.../split?splitAlgorithmName=...&unload=...``).  A new
  leader starts with a fresh shedder history.
* Every decision (with its reason) is logged and kept (the last ``DECISIONS_KEPT``)
  for :meth:`stats`; counters feed ``/metrics``.

The config is read afresh each round (``LoadBalancerConfig.from_properties``), so
dynamic-config changes apply at the next round; an invalid value keeps the last
valid config and is logged.
"""

from __future__ import annotations

import asyncio
import collections
import importlib
import json
import logging
from typing import TYPE_CHECKING, Any

import httpx

from magnetar.broker import errors
from magnetar.broker.config import ConfigError
from magnetar.broker.loadbalance.api import load_manager_kind
from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.loadbalance.data import Decision, LoadReport, Weights, namespace_of
from magnetar.broker.loadbalance.placement import (
    ClusterView,
    isolation_policies_from_doc,
    plan_isolation_moves,
    select_broker,
)
from magnetar.broker.loadbalance.reporter import LoadReporter
from magnetar.broker.loadbalance.shedder import ShedderState, plan_shedding
from magnetar.broker.loadbalance.split import bundles_to_split
from magnetar.broker.ownership.bundles import BundleRange, NamespaceBundle, boundaries_of
from magnetar.metadata.api import MetadataError
from magnetar.runtime import TaskSupervisor

if TYPE_CHECKING:
    from magnetar.broker.service.api import LoadBalanceHost

log = logging.getLogger(__name__)

DECISIONS_KEPT = 200
CONTEXT_TTL_S = 2.0
HTTP_TIMEOUT_S = 60.0
CLOSE_ATTEMPTS = 50
RECENT_MIN_S = 5.0
CLOSE_RETRY_S = 0.1


class LeaderLoadManager:
    def __init__(self, svc: LoadBalanceHost, ns_service: Any, kind: str = "leader") -> None:
        self._svc = svc
        self._ns = ns_service
        self.kind = kind
        self._supervisor = TaskSupervisor("load-manager")
        self._tasks: list[asyncio.Task] = []
        self._closed = False
        self._recent: list[tuple[float, str]] = []  # (when, broker) of our recent placements
        self._reporter: LoadReporter | None = None
        self._cfg = LoadBalancerConfig()
        self._published: LoadReport | None = None
        self._published_at = 0.0
        self._latest: LoadReport | None = None
        self._shedder = ShedderState()
        self._was_leader = False
        self._context: tuple[float, dict] | None = None
        self.decisions: collections.deque[Decision] = collections.deque(maxlen=DECISIONS_KEPT)
        self.last_round: list[dict] = []
        self.counters: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------------ lifecycle
    def config(self) -> LoadBalancerConfig:
        try:
            self._cfg = LoadBalancerConfig.from_properties(self._svc.config.as_properties())
        except ConfigError as e:
            log.warning("load balancer config invalid (%s); keeping the last valid one", e)
        return self._cfg

    async def start(self) -> None:
        self.config()
        self._reporter = LoadReporter(self._svc, self._ns.broker_id())
        self._tasks.append(self._supervisor.spawn(self._report_loop(), name="load-report"))
        if self.kind == "leader":
            self._tasks.append(self._supervisor.spawn(self._leader_loop(), name="load-leader"))

    async def aclose(self) -> None:
        """Stops the loops.  A cancellation can be swallowed by an await that completes at the
        same moment (``asyncio.wait_for`` on Python 3.11 does that; the ZooKeeper store's calls,
        where the load-report loop lost its cancel, use ``asyncio.timeout`` now); as a defence
        against any other such await, the loops are cancelled until they end."""
        self._closed = True
        for _ in range(CLOSE_ATTEMPTS):
            live = [t for t in self._tasks if not t.done()]
            if not live:
                break
            for t in live:
                t.cancel()
            await asyncio.wait(live, timeout=CLOSE_RETRY_S)
        await self._supervisor.aclose()

    def is_leader(self) -> bool:
        return bool(self._ns.registry.election.is_leader)

    # ------------------------------------------------------------------ reports
    def registration_fields(self) -> dict[str, Any]:
        return self._published.to_json_dict() if self._published is not None else {}

    def local_report(self) -> dict[str, Any]:
        report = self._latest or self._published
        return report.to_json_dict() if report is not None else {}

    async def refresh_report(self) -> dict[str, Any]:
        """Computes the report now (the admin ``load-report`` call before the first interval)."""
        if self._latest is None:
            await self._compute(self.config())
        return self.local_report()

    async def _compute(self, cfg: LoadBalancerConfig) -> LoadReport:
        assert self._reporter is not None
        owned = [b.name for b in self._ns.ownership.owned()]
        self._latest = await self._reporter.compute(cfg, owned)
        return self._latest

    async def _report_loop(self) -> None:
        clock = self._svc.clock
        while not self._closed:
            cfg = self.config()
            await clock.sleep(max(0.05, cfg.report_update_min_interval_ms / 1000.0))
            try:
                report = await self._compute(cfg)
            except MetadataError as e:
                log.info("load report not computed (%s)", e)
                continue
            stale = clock.monotonic() - self._published_at >= cfg.report_update_max_interval_min * 60.0
            if report.changed_enough(self._published, cfg.report_update_threshold_pct) or stale:
                self._published, self._published_at = report, clock.monotonic()
                try:
                    await self._ns.refresh_registration()
                    self.counters["reports_published"] += 1
                except MetadataError as e:
                    log.info("load report not published (%s)", e)

    # ------------------------------------------------------------------ the cluster's view
    async def _cluster_context(self) -> dict:
        """Isolation policies and failure domains, read afresh (a policy set a moment ago holds
        for the next placement); the namespaces' anti-affinity groups, kept ``CONTEXT_TTL_S``."""
        store, cluster = self._svc.metadata_store, self._svc.config.cluster_name
        root = f"/admin/clusters/{cluster}"
        got = await store.get(f"{root}/namespaceIsolationPolicies")
        policies = isolation_policies_from_doc(_json(got.value) if got is not None else None)
        domains: dict[str, str] = {}
        for name in await store.children(f"{root}/failureDomain"):
            doc = await store.get(f"{root}/failureDomain/{name}")
            for broker in (_json(doc.value) or {}).get("brokers", []) if doc is not None else []:
                domains[str(broker)] = name
        now = self._svc.clock.monotonic()
        if self._context is None or now - self._context[0] >= CONTEXT_TTL_S:
            self._context = (now, {})
        return {"policies": policies, "domains": domains, "anti": self._context[1]}

    async def _anti_affinity(
        self, ctx: dict, namespaces: set[str], fresh: frozenset[str] | set[str] = frozenset()
    ) -> dict[str, str]:
        anti: dict[str, str | None] = ctx["anti"]
        for ns in (namespaces - set(anti)) | set(fresh):
            pol = await self._svc.resources.namespaces.get(ns)
            anti[ns] = (pol or {}).get("antiAffinityGroup") or None
        return {ns: g for ns, g in anti.items() if g}

    async def _view(
        self, cfg: LoadBalancerConfig, infos: list[Any], extra_namespaces: set[str] | None = None
    ) -> ClusterView:
        me = self._ns.broker_id()
        reports = {}
        for info in infos:
            if info.broker_id == me and self._latest is not None:
                reports[me] = self._latest
            else:
                reports[info.broker_id] = LoadReport.from_json_dict(info.broker_id, info.load or {})
        ctx = await self._cluster_context()
        namespaces = {namespace_of(n) for r in reports.values() for n in r.bundles}
        extra = set(extra_namespaces or ())
        anti = await self._anti_affinity(ctx, extra, fresh=extra)
        if extra_namespaces is None or any(ns in anti for ns in extra):  # the others matter only then
            anti = await self._anti_affinity(ctx, namespaces)
        view = ClusterView(
            reports,
            policies=ctx["policies"],
            anti_affinity=anti,
            domains=ctx["domains"],
            weights=_weights(cfg),
        )
        view.set_bundle_counts({i.broker_id: i.num_bundles for i in infos})
        return view

    # ------------------------------------------------------------------ placement
    async def select_broker(
        self, bundle: NamespaceBundle, brokers: list[Any], avoid: str | None
    ) -> Decision | None:
        cfg = self.config()
        if not brokers:
            return None
        view = await self._view(cfg, brokers, extra_namespaces={bundle.namespace})
        self._count_recent(view, cfg)
        if self.kind == "noop" or not cfg.enabled:
            # no load-based choice, but isolation still holds
            d = select_broker(bundle.name, view, band_pct=1e9, avoid=avoid, now_ms=self._svc.clock.time_ms())
        else:
            d = select_broker(
                bundle.name,
                view,
                overloaded_pct=cfg.overloaded_threshold_pct,
                band_pct=cfg.placement_band_pct,
                avoid=avoid,
                now_ms=self._svc.clock.time_ms(),
            )
        self._record(d)
        if d.destination is not None:
            self._recent.append((self._svc.clock.monotonic(), d.destination))
        return d

    def _count_recent(self, view: ClusterView, cfg: LoadBalancerConfig) -> None:
        """Bundles we placed since the brokers' last reports count already (Pulsar's
        preallocated bundles): a burst of lookups -- the partitions of a new topic -- spreads
        instead of all landing on the broker that was least loaded a moment ago.  Each counts
        one bundle and a third of the placement band of usage."""
        horizon = self._svc.clock.monotonic() - max(
            RECENT_MIN_S, 2 * cfg.report_update_min_interval_ms / 1000
        )
        self._recent = [(t, b) for t, b in self._recent if t >= horizon]
        extra: dict[str, int] = {}
        for _t, b in self._recent:
            extra[b] = extra.get(b, 0) + 1
        view.set_bundle_counts({b: view.bundle_count(b) + n for b, n in extra.items() if b in view.reports})
        for b, n in extra.items():
            if b in view.reports:
                view.usage_estimate[b] = view.usage(b) + n * cfg.placement_band_pct / 300.0

    # ------------------------------------------------------------------ the leader's round
    async def _leader_loop(self) -> None:
        while not self._closed:
            cfg = self.config()
            await self._svc.clock.sleep(cfg.shedding_interval_s)
            if not self.is_leader():
                self._was_leader = False
                continue
            if not self._was_leader:
                self._shedder = ShedderState()  # a new leader starts with its own history
                self._was_leader = True
            try:
                await self.run_round(cfg)
            except (MetadataError, errors.BrokerError, httpx.HTTPError) as e:
                log.warning("load manager round failed: %s", e)
                self.counters["round_failures"] += 1

    async def run_round(self, cfg: LoadBalancerConfig | None = None) -> list[Decision]:
        cfg = cfg or self.config()
        if not cfg.enabled or self.kind != "leader":
            return []
        infos = await self._ns.registry.live_brokers()
        view = await self._view(cfg, infos)
        now = self._svc.clock.time_ms()
        urls = {i.broker_id: i.web_service_url for i in infos}
        place = {"overloaded_pct": cfg.overloaded_threshold_pct, "band_pct": cfg.placement_band_pct}
        decisions = plan_isolation_moves(view, now_ms=now, **place)
        if cfg.shedding_enabled:
            decisions += plan_shedding(view, self._shedder, cfg, now)
        if cfg.auto_bundle_split_enabled:
            loads = {n: bl for r in view.reports.values() for n, bl in r.bundles.items()}
            counts = await self._bundle_counts({namespace_of(n) for n in loads})
            decisions += bundles_to_split(loads, counts, cfg, now)
        self.counters["rounds"] += 1
        self.last_round = [d.to_json() for d in decisions]
        for d in decisions:
            self._record(d)
            try:
                if d.kind == "unload":
                    await self._unload(d, urls)
                elif d.kind == "split":
                    await self._split(d, view.owner.get(d.bundle or ""), urls, cfg)
            except (errors.BrokerError, MetadataError, httpx.HTTPError) as e:
                log.warning("load manager: %s of %s failed: %s", d.kind, d.bundle, e)
                self.counters[f"{d.kind}_failures"] += 1
        return decisions

    async def _bundle_counts(self, namespaces: set[str]) -> dict[str, int]:
        out = {}
        for ns in namespaces:
            pol = await self._svc.resources.namespaces.get(ns)
            out[ns] = len(boundaries_of(pol, self._svc.config.default_number_of_namespace_bundles)) - 1
        return out

    async def _unload(self, d: Decision, urls: dict[str, str]) -> None:
        assert d.bundle is not None and d.source is not None
        if d.source == self._ns.broker_id():
            await self._ns.unload_bundle(_bundle(d.bundle), d.destination)
        else:
            params = {"authoritative": "true"}
            if d.destination:
                params["destinationBroker"] = d.destination
            await self._http("PUT", f"{urls[d.source]}/admin/v2/namespaces/{d.bundle}/unload", params)
        self.counters["bundles_unloaded"] += 1

    async def _split(
        self, d: Decision, owner: str | None, urls: dict[str, str], cfg: LoadBalancerConfig
    ) -> None:
        if d.bundle is None or owner is None or owner not in urls:
            return
        params = {
            "authoritative": "true",
            "unload": str(cfg.auto_unload_split_bundles_enabled).lower(),
            "splitAlgorithmName": cfg.split_algorithm,
        }
        await self._http("PUT", f"{urls[owner]}/admin/v2/namespaces/{d.bundle}/split", params)
        self.counters["bundles_split"] += 1

    async def _http(self, method: str, url: str, params: dict[str, str]) -> None:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, headers=self._auth_headers()) as http:
            resp = await http.request(method, url, params=params)
        if resp.status_code not in (200, 204, 307):
            raise errors.BrokerError(f"{method} {url} answered {resp.status_code}: {resp.text[:200]}")

    def _auth_headers(self) -> dict[str, str]:
        props = self._svc.config.as_properties()
        plugin = str(props.get("brokerClientAuthenticationPlugin") or "")
        params = str(props.get("brokerClientAuthenticationParameters") or "")
        if plugin.endswith("AuthenticationToken") and params.startswith("token:"):
            return {"Authorization": f"Bearer {params[len('token:') :]}"}
        return {}

    # ------------------------------------------------------------------ stats
    def _record(self, d: Decision) -> None:
        self.counters[f"decisions_{d.kind}"] += 1
        if d.kind == "skip":
            log.debug("load manager: skip %s: %s", d.bundle or d.source, d.reason)
            return
        self.decisions.append(d)
        level = logging.DEBUG if d.kind == "place" else logging.INFO
        log.log(
            level, "load manager: %s %s %s -> %s: %s", d.kind, d.bundle, d.source, d.destination, d.reason
        )

    def stats(self) -> dict[str, Any]:
        return {
            "loadManager": self.kind,
            "leader": self.is_leader(),
            "counters": dict(self.counters),
            "decisions": [d.to_json() for d in self.decisions],
            "lastRound": list(self.last_round),
        }


def make_load_manager(svc: LoadBalanceHost, ns_service: Any) -> Any:
    """The load manager ``loadManagerClassName`` / ``loadBalancerEnabled`` name (see api.py)."""
    cfg = LoadBalancerConfig.from_properties(svc.config.as_properties())
    kind = load_manager_kind(cfg.load_manager_class_name, cfg.enabled)
    if kind == "plugin":
        module, _, cls = cfg.load_manager_class_name.partition(":")
        return getattr(importlib.import_module(module), cls)(svc, ns_service)
    return LeaderLoadManager(svc, ns_service, kind)


def _bundle(name: str) -> NamespaceBundle:
    ns, rng = name.rsplit("/", 1)
    return NamespaceBundle(ns, BundleRange.parse(rng))


def _weights(cfg: LoadBalancerConfig) -> Weights:
    return Weights(
        cpu=cfg.cpu_weight,
        memory=cfg.memory_weight,
        direct_memory=cfg.direct_memory_weight,
        bandwidth_in=cfg.bandwidth_in_weight,
        bandwidth_out=cfg.bandwidth_out_weight,
    )


def _json(raw: bytes | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
