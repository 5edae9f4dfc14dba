"""``/metrics``: Prometheus text exposition of real counters.

Theory of operation: each app gets its own ``CollectorRegistry`` (no global
registry -- two brokers in one test process must not share counters).  What is
exported is only what is actually measured: HTTP requests served (counted by a
middleware, by method and status class) and, at scrape time, every numeric
value of the broker service's ``statistics()`` as a gauge named
``magnetar_broker_<key>``.  Pulsar's own metric names and labels come from
``metrics_pulsar`` (topics, subscriptions, broker, managed ledger, lookups,
connections, authentication) and ``metrics_process`` (process_*, event-loop
lag, the standalone's bookie).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from magnetar.broker.service.api import MetricsSource
from magnetar.web.metrics_lb import LoadBalanceCollector
from magnetar.web.metrics_process import install_process_metrics
from magnetar.web.metrics_pulsar import PulsarBrokerCollector
from magnetar.web.metrics_resource_groups import ResourceGroupCollector
from magnetar.web.metrics_txn import TransactionCollector

router = APIRouter(tags=["metrics"])

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


def install_metrics(app: FastAPI, broker_service: Any) -> CollectorRegistry:
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
    app.state.metrics_registry = registry

    @app.middleware("http")
    async def count_requests(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        requests.labels(request.method, f"{response.status_code // 100}xx").inc()
        return response

    return registry


@router.get("/metrics")
@router.get("/metrics/")
async def metrics(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.metrics_registry
    return Response(content=generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
