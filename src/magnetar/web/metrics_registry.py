"""The web service's metrics registry, without FastAPI (``/metrics`` at start-up).

Theory of operation: each web service gets its own ``CollectorRegistry`` (no
global registry -- two brokers in one test process must not share counters),
made once at start by :func:`build_registry`: the HTTP request counter
(``magnetar_http_requests``, by method and status class, counted by whoever
serves HTTP: ``web.front`` or, for an app built alone, ``web.metrics``'s
middleware), every numeric value of the broker service's ``statistics()`` as a
gauge named ``magnetar_broker_<key>``, Pulsar's names (``metrics_pulsar``,
``metrics_txn``, ``metrics_lb``, ``metrics_resource_groups``) and the
process/event-loop collectors (``metrics_process``).  :func:`exposition` is
the body and content type of a scrape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from magnetar.broker.service.api import MetricsSource
from magnetar.web.metrics_lb import LoadBalanceCollector
from magnetar.web.metrics_process import install_process_metrics
from magnetar.web.metrics_pulsar import PulsarBrokerCollector
from magnetar.web.metrics_resource_groups import ResourceGroupCollector
from magnetar.web.metrics_txn import TransactionCollector

_NON_METRIC_CHARS = re.compile(r"[^a-zA-Z0-9_]")


class BrokerStatsCollector(Collector):
    """Reads ``statistics()`` of the service at scrape time (a cheap, synchronous snapshot)."""

    def __init__(self, broker_service: MetricsSource) -> None:
        self._svc = broker_service

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = getattr(self._svc, "statistics", None)
        if stats is None:
            return
        for key, value in sorted(_flatten(stats()).items()):
            name = "magnetar_broker_" + _NON_METRIC_CHARS.sub("_", _snake(key))
            yield GaugeMetricFamily(name, f"broker statistic {key}", value=float(value))


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _flatten(stats: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if not isinstance(stats, dict):
        return out
    for key, value in stats.items():
        full = f"{prefix}{key}"
        if isinstance(value, bool):
            out[full] = float(value)
        elif isinstance(value, int | float):
            out[full] = float(value)
        elif isinstance(value, dict):
            out.update(_flatten(value, full + "_"))
    return out


def build_registry(broker_service: Any) -> tuple[CollectorRegistry, Counter]:
    """The registry with every collector, and its HTTP request counter."""
    registry = CollectorRegistry(auto_describe=False)
    requests = Counter(
        "magnetar_http_requests",
        "HTTP requests served by the broker's web service",
        ["method", "status"],
        registry=registry,
    )
    registry.register(BrokerStatsCollector(broker_service))
    registry.register(PulsarBrokerCollector(broker_service))  # Pulsar's names (metrics_pulsar.py)
    registry.register(TransactionCollector(broker_service))  # pulsar_txn_* (metrics_txn.py)
    registry.register(LoadBalanceCollector(broker_service))  # pulsar_lb_*, pulsar_bundle_* (metrics_lb.py)
    registry.register(ResourceGroupCollector(broker_service))  # pulsar_resource_group_*
    install_process_metrics(registry, broker_service)
    return registry, requests


def exposition(registry: CollectorRegistry) -> tuple[bytes, str]:
    """A scrape: the text exposition and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST
