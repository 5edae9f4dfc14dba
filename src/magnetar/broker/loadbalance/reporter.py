"""This broker's load report: the process's resources and its topics' traffic, by bundle.

Theory of operation: :meth:`LoadReporter.compute` walks the loaded topics once,
turning their cumulative counters (messages and bytes in from producers, out to
consumers) into rates over the time since the previous call, and adds them up
per bundle (the bundle of a topic comes from its namespace's boundaries, read
once per namespace per report).  Every bundle this broker owns appears, with
zero traffic when none of its topics is loaded.  Resources: CPU is this
process's CPU time since the last call as a share of the machine's cores
(psutil), memory its RSS over the machine's memory, direct memory is not
tracked (0/0), and bandwidth in/out is the topics' throughput against
``loadBalancerOverrideBrokerNicSpeedGbps`` (a process cannot tell its share of a
NIC, so the message traffic is the measure).  The clock is injected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import psutil

from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.loadbalance.data import BundleLoad, LoadReport, ResourceUsage
from magnetar.broker.ownership.bundles import boundaries_of, find_range, topic_hash
from magnetar.metadata.api import MetadataError

if TYPE_CHECKING:
    from magnetar.broker.service.api import LoadBalanceHost


class LoadReporter:
    def __init__(self, svc: LoadBalanceHost, broker_id: str) -> None:
        self._svc = svc
        self.broker_id = broker_id
        self._last_t: float | None = None
        self._last: dict[str, tuple[int, int, int, int]] = {}  # topic -> msg/bytes in, msg/bytes out
        self._proc = psutil.Process()
        self._cores = psutil.cpu_count() or 1
        self._total_mem = psutil.virtual_memory().total
        with contextlib.suppress(psutil.Error):
            self._proc.cpu_percent(None)  # the first call starts the measuring interval

    async def compute(self, cfg: LoadBalancerConfig, owned: Iterable[str] = ()) -> LoadReport:
        now = self._svc.clock.monotonic()
        elapsed = (now - self._last_t) if self._last_t is not None else 0.0
        self._last_t = now
        bounds: dict[str, list[int] | None] = {}
        acc: dict[str, dict[str, float]] = {name: _zero() for name in owned}
        seen: dict[str, tuple[int, int, int, int]] = {}
        for topic in list(self._svc.topics.loaded()):
            ref = topic.ref
            ns = ref.namespace
            if ns not in bounds:
                bounds[ns] = await self._boundaries(ns)
            b = bounds[ns]
            if b is None:
                continue
            bundle = f"{ns}/{find_range(b, topic_hash(ref.full_name)).name}"
            counters = _counters(topic)
            seen[ref.full_name] = counters
            prev = self._last.get(ref.full_name, counters)
            a = acc.setdefault(bundle, _zero())
            a["topics"] += 1
            a["producers"] += len(getattr(topic, "producers", {}) or {})
            a["consumers"] += sum(
                len(s.consumers) for s in (getattr(topic, "subscriptions", {}) or {}).values()
            )
            if elapsed > 0:
                a["msg_in"] += max(0, counters[0] - prev[0]) / elapsed
                a["bytes_in"] += max(0, counters[1] - prev[1]) / elapsed
                a["msg_out"] += max(0, counters[2] - prev[2]) / elapsed
                a["bytes_out"] += max(0, counters[3] - prev[3]) / elapsed
        self._last = seen
        bundles = {
            name: BundleLoad(
                msg_rate_in=a["msg_in"],
                msg_rate_out=a["msg_out"],
                throughput_in=a["bytes_in"],
                throughput_out=a["bytes_out"],
                topics=int(a["topics"]),
                producers=int(a["producers"]),
                consumers=int(a["consumers"]),
            )
            for name, a in acc.items()
        }
        limit = cfg.bandwidth_limit_bytes_s
        t_in = sum(bl.throughput_in for bl in bundles.values())
        t_out = sum(bl.throughput_out for bl in bundles.values())
        cpu = rss = 0.0
        with contextlib.suppress(psutil.Error):
            cpu = self._proc.cpu_percent(None)
            rss = float(self._proc.memory_info().rss)
        return LoadReport(
            self.broker_id,
            cpu=ResourceUsage(cpu, 100.0 * self._cores),
            memory=ResourceUsage(rss / 2**20, self._total_mem / 2**20),
            direct_memory=ResourceUsage(0.0, 0.0),
            bandwidth_in=ResourceUsage(t_in, limit),
            bandwidth_out=ResourceUsage(t_out, limit),
            connections=len(self._svc.connections),
            bundles=bundles,
            timestamp_ms=self._svc.clock.time_ms(),
        )

    async def _boundaries(self, namespace: str) -> list[int] | None:
        try:
            policies = await self._svc.resources.namespaces.get(namespace)
        except MetadataError:
            return None
        if policies is None:
            return None
        return boundaries_of(policies, self._svc.config.default_number_of_namespace_bundles)


def _zero() -> dict[str, float]:
    return dict.fromkeys(
        ("msg_in", "bytes_in", "msg_out", "bytes_out", "topics", "producers", "consumers"), 0.0
    )


def _counters(topic: Any) -> tuple[int, int, int, int]:
    msg_out = bytes_out = 0
    for sub in (getattr(topic, "subscriptions", {}) or {}).values():
        for c in getattr(sub, "consumers", ()):
            msg_out += getattr(c, "msg_out_counter", 0)
            bytes_out += getattr(c, "bytes_out_counter", 0)
    return (
        int(getattr(topic, "msg_in_counter", 0)),
        int(getattr(topic, "bytes_in_counter", 0)),
        msg_out,
        bytes_out,
    )
