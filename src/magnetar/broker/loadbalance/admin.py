"""Admin operations of load management: broker stats, the decisions, and the graceful drain.

Theory of operation: the web layer (``web/load_balance.py``) calls one
:class:`LoadAdmin` per app.

* ``load_report``: this broker's LocalBrokerData -- the load manager's last
  report (computed now if none yet); a standalone (no load manager) computes
  one with its own :class:`~.reporter.LoadReporter`.
* ``topics``: Pulsar's ``broker-stats/topics`` map
  ``namespace -> bundle -> persistent|non-persistent -> topic -> stats``.
* ``allocator_stats``: Pulsar answers Netty's allocator stats; Magnetar has no
  Netty arenas, so it answers the same shape with the process's memory as
  "used heap" (``default``, ``ml-cache``; other names are a 412 as in Pulsar).
* ``decisions``: the load manager's stats (leader flag, counters, the recent
  decisions with their reasons, the last round's skips).
* ``shutdown`` (``POST /admin/v2/brokers/shutdown``): the graceful drain --
  leave the broker list, unload the owned bundles one by one (at most
  ``maxConcurrentUnloadPerSec`` per second; clients look up again and reconnect
  to the brokers that take them), then ask the process to stop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psutil

from magnetar.broker import errors
from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.loadbalance.reporter import LoadReporter
from magnetar.broker.ownership.bundles import boundaries_of, find_range, topic_hash
from magnetar.broker.service.stats import topic_stats_dict
from magnetar.metadata.api import MetadataError

if TYPE_CHECKING:
    from magnetar.broker.service.api import LoadBalanceHost

log = logging.getLogger(__name__)

ALLOCATORS = ("default", "ml-cache")


class LoadAdmin:
    def __init__(self, svc: LoadBalanceHost) -> None:
        self._svc = svc
        self._reporter: LoadReporter | None = None

    @property
    def load_manager(self) -> Any:
        return getattr(self._svc.namespace_service, "load_manager", None)  # a cluster's only

    async def load_report(self) -> dict:
        lm = self.load_manager
        if lm is not None:
            return await lm.refresh_report()
        if self._reporter is None:
            self._reporter = LoadReporter(self._svc, self._svc.web_service_url().split("://", 1)[-1])
        cfg = LoadBalancerConfig.from_properties(self._svc.config.as_properties())
        return (await self._reporter.compute(cfg)).to_json_dict()

    async def topics(self) -> dict:
        out: dict[str, dict] = {}
        bounds: dict[str, list[int] | None] = {}
        web = self._svc.web_service_url()
        for topic in list(self._svc.topics.loaded()):
            ref = topic.ref
            ns = ref.namespace
            if ns not in bounds:
                try:
                    pol = await self._svc.resources.namespaces.get(ns)
                except MetadataError:
                    pol = None
                bounds[ns] = (
                    boundaries_of(pol, self._svc.config.default_number_of_namespace_bundles) if pol else None
                )
            b = bounds[ns]
            bundle = find_range(b, topic_hash(ref.full_name)).name if b else "0x00000000_0xffffffff"
            try:
                stats = topic_stats_dict(topic, web)
            except AttributeError:  # a non-persistent topic: its own, smaller stats
                stats = topic.to_stats() if hasattr(topic, "to_stats") else {}
            out.setdefault(ns, {}).setdefault(bundle, {}).setdefault(ref.domain, {})[ref.full_name] = stats
        return out

    def allocator_stats(self, allocator: str) -> dict:
        if allocator not in ALLOCATORS:
            raise errors.PreconditionFailedError(f"Allocator name is not valid: {allocator}")
        rss = 0
        with contextlib.suppress(psutil.Error):
            rss = psutil.Process().memory_info().rss
        return {
            "numDirectArenas": 0,
            "numHeapArenas": 0,
            "numThreadLocalCaches": 0,
            "normalCacheSize": 0,
            "smallCacheSize": 0,
            "usedDirectMemory": 0,
            "usedHeapMemory": rss if allocator == "default" else 0,
            "directArenas": [],
            "heapArenas": [],
        }

    def decisions(self) -> dict:
        lm = self.load_manager
        if lm is None:
            return {"loadManager": "none", "leader": False, "counters": {}, "decisions": [], "lastRound": []}
        return lm.stats()

    def shutdown(self, request_stop: Callable[[], None] | None, max_per_sec: float | None = None) -> int:
        """Starts the drain (the call answers at once, as Pulsar's does): the owned bundles are
        unloaded one by one, then the process is asked to stop.  Returns how many bundles go."""
        if request_stop is None:
            raise errors.PreconditionFailedError("this broker cannot be shut down through the admin API")
        ns = self._svc.namespace_service
        ownership = getattr(ns, "ownership", None)
        if ownership is None:  # the standalone: it owns everything, nobody to hand over to
            request_stop()
            return 0
        n = len(ownership.owned())
        self._svc.supervisor.spawn(self._drain(ns, n, request_stop, max_per_sec), name="admin-shutdown-drain")
        return n

    async def _drain(
        self, ns: Any, n: int, request_stop: Callable[[], None], max_per_sec: float | None
    ) -> None:
        clock = self._svc.clock
        t0 = clock.monotonic()
        log.warning("shutdown requested: draining %d bundles", n)
        try:
            await ns.prepare_shutdown(max_per_sec)
        finally:
            log.warning("drained in %.1f s; stopping", clock.monotonic() - t0)
            request_stop()
