"""Load report data: what one broker publishes about its load (Pulsar's LocalBrokerData).

Theory of operation: a :class:`LoadReport` is one broker's view of itself at one
moment: resource usages (CPU, memory, direct memory, bandwidth in and out, each
``{usage, limit}`` as Pulsar writes them), message rates and throughput (bytes/s)
in and out, topic / bundle / producer / consumer / connection counts, and per
bundle a :class:`BundleLoad` (Pulsar's NamespaceBundleStats).  It travels as JSON
in Pulsar's field names inside the broker's registration node
``/loadbalance/brokers/{id}`` (:meth:`LoadReport.to_json_dict` /
:meth:`from_json_dict`), so the leader reads every broker's load with the broker
list.

:meth:`LoadReport.usage` is the number every decision compares: the weighted
maximum of the resource percentages (Pulsar's ``getMaxResourceUsageWithWeight``),
0..1 (it may exceed 1 when a resource is over its limit).  :meth:`changed_enough`
is the reporter's "publish now" test
(``loadBalancerReportUpdateThresholdPercentage``).  Pure data: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    usage: float = 0.0
    limit: float = 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.usage / self.limit if self.limit > 0 else 0.0

    def to_json(self) -> dict[str, float]:
        return {"usage": self.usage, "limit": self.limit}

    @classmethod
    def from_json(cls, doc: Any) -> ResourceUsage:
        if not isinstance(doc, Mapping):
            return cls()
        return cls(float(doc.get("usage") or 0.0), float(doc.get("limit") or 0.0))


@dataclass(frozen=True, slots=True)
class BundleLoad:
    """Pulsar's NamespaceBundleStats for one bundle (``tenant/ns/0x..._0x...``)."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    throughput_in: float = 0.0  # bytes/s
    throughput_out: float = 0.0
    topics: int = 0
    producers: int = 0
    consumers: int = 0

    @property
    def throughput(self) -> float:
        return self.throughput_in + self.throughput_out

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def sessions(self) -> int:
        return self.producers + self.consumers

    def to_json(self) -> dict[str, Any]:
        return {
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.throughput_in,
            "msgThroughputOut": self.throughput_out,
            "topics": self.topics,
            "producerCount": self.producers,
            "consumerCount": self.consumers,
            "cacheSize": 0,
        }

    @classmethod
    def from_json(cls, doc: Any) -> BundleLoad:
        if not isinstance(doc, Mapping):
            return cls()
        return cls(
            msg_rate_in=float(doc.get("msgRateIn") or 0.0),
            msg_rate_out=float(doc.get("msgRateOut") or 0.0),
            throughput_in=float(doc.get("msgThroughputIn") or 0.0),
            throughput_out=float(doc.get("msgThroughputOut") or 0.0),
            topics=int(doc.get("topics") or 0),
            producers=int(doc.get("producerCount") or 0),
            consumers=int(doc.get("consumerCount") or 0),
        )


@dataclass(frozen=True, slots=True)
class Weights:
    cpu: float = 1.0
    memory: float = 1.0
    direct_memory: float = 1.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0


@dataclass(frozen=True, slots=True)
class LoadReport:
    broker_id: str
    cpu: ResourceUsage = ResourceUsage()
    memory: ResourceUsage = ResourceUsage()
    direct_memory: ResourceUsage = ResourceUsage()
    bandwidth_in: ResourceUsage = ResourceUsage()
    bandwidth_out: ResourceUsage = ResourceUsage()
    connections: int = 0
    bundles: Mapping[str, BundleLoad] = field(default_factory=dict)
    timestamp_ms: int = 0

    # -- totals over the bundles -----------------------------------------------------------------
    @property
    def msg_rate_in(self) -> float:
        return sum(b.msg_rate_in for b in self.bundles.values())

    @property
    def msg_rate_out(self) -> float:
        return sum(b.msg_rate_out for b in self.bundles.values())

    @property
    def throughput_in(self) -> float:
        return sum(b.throughput_in for b in self.bundles.values())

    @property
    def throughput_out(self) -> float:
        return sum(b.throughput_out for b in self.bundles.values())

    @property
    def throughput(self) -> float:
        return self.throughput_in + self.throughput_out

    @property
    def num_topics(self) -> int:
        return sum(b.topics for b in self.bundles.values())

    def usage(self, w: Weights = Weights()) -> float:
        """The weighted maximum resource usage, as a fraction (Pulsar's max usage with weight)."""
        return (
            max(
                self.cpu.percent * w.cpu,
                self.memory.percent * w.memory,
                self.direct_memory.percent * w.direct_memory,
                self.bandwidth_in.percent * w.bandwidth_in,
                self.bandwidth_out.percent * w.bandwidth_out,
            )
            / 100.0
        )

    def changed_enough(self, last: LoadReport | None, threshold_pct: float) -> bool:
        """True when this report differs from the last published one by ``threshold_pct``
        (any resource, the message rates or throughput, or the bundle set)."""
        if last is None or set(self.bundles) != set(last.bundles):
            return True
        for a, b in (
            (self.cpu.percent, last.cpu.percent),
            (self.memory.percent, last.memory.percent),
            (self.direct_memory.percent, last.direct_memory.percent),
            (self.bandwidth_in.percent, last.bandwidth_in.percent),
            (self.bandwidth_out.percent, last.bandwidth_out.percent),
        ):
            if abs(a - b) >= threshold_pct:
                return True
        for a, b in ((self.msg_rate_in + self.msg_rate_out, last.msg_rate_in + last.msg_rate_out),
                     (self.throughput, last.throughput)):  # fmt: skip
            base = max(abs(b), 1.0)
            if abs(a - b) * 100.0 / base >= threshold_pct and abs(a - b) >= 1.0:
                return True
        return False

    # -- JSON (LocalBrokerData's field names) ----------------------------------------------------
    def to_json_dict(self) -> dict[str, Any]:
        producers = sum(b.producers for b in self.bundles.values())
        consumers = sum(b.consumers for b in self.bundles.values())
        return {
            "cpu": self.cpu.to_json(),
            "memory": self.memory.to_json(),
            "directMemory": self.direct_memory.to_json(),
            "bandwidthIn": self.bandwidth_in.to_json(),
            "bandwidthOut": self.bandwidth_out.to_json(),
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.throughput_in,
            "msgThroughputOut": self.throughput_out,
            "numTopics": self.num_topics,
            "numBundles": len(self.bundles),
            "numProducers": producers,
            "numConsumers": consumers,
            "numConnections": self.connections,
            "bundles": sorted(self.bundles),
            "lastStats": {name: b.to_json() for name, b in sorted(self.bundles.items())},
            "lastUpdate": self.timestamp_ms,
        }

    @classmethod
    def from_json_dict(cls, broker_id: str, doc: Mapping[str, Any]) -> LoadReport:
        stats = doc.get("lastStats") if isinstance(doc.get("lastStats"), Mapping) else {}
        names = doc.get("bundles") if isinstance(doc.get("bundles"), list) else list(stats)
        return cls(
            broker_id=broker_id,
            cpu=ResourceUsage.from_json(doc.get("cpu")),
            memory=ResourceUsage.from_json(doc.get("memory")),
            direct_memory=ResourceUsage.from_json(doc.get("directMemory")),
            bandwidth_in=ResourceUsage.from_json(doc.get("bandwidthIn")),
            bandwidth_out=ResourceUsage.from_json(doc.get("bandwidthOut")),
            connections=int(doc.get("numConnections") or 0),
            bundles={str(n): BundleLoad.from_json(stats.get(n)) for n in names},
            timestamp_ms=int(doc.get("lastUpdate") or 0),
        )


def namespace_of(bundle_name: str) -> str:
    """``tenant/ns`` of ``tenant/ns/0x..._0x...``."""
    return bundle_name.rsplit("/", 1)[0]


@dataclass(frozen=True, slots=True)
class Decision:
    """One load-manager decision and why: ``place`` (a bundle's broker), ``unload`` (shedding:
    move ``bundle`` from ``source`` to ``destination``), ``split``, or ``skip`` (a broker or
    bundle considered and left alone; the reason says why)."""

    kind: str
    bundle: str | None
    reason: str
    source: str | None = None
    destination: str | None = None
    at_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bundle": self.bundle,
            "source": self.source,
            "destination": self.destination,
            "reason": self.reason,
            "timestamp": self.at_ms,
        }
