"""``/metrics``: Prometheus text exposition of real counters (the FastAPI route).

Theory of operation: the registry and its collectors are built without FastAPI
by ``metrics_registry`` (the start-up front, ``web.front``, serves ``/metrics``
from it before the FastAPI app exists).  What is exported is only what is
actually measured: HTTP requests served (by method and status class) and, at
scrape time, every numeric value of the broker service's ``statistics()`` as
a gauge named ``magnetar_broker_<key>``.  Pulsar's own metric names and labels
come from ``metrics_pulsar`` (topics, subscriptions, broker, managed ledger,
lookups, connections, authentication) and ``metrics_process`` (process_*,
event-loop lag, the standalone's bookie).  An app built behind the front
shares the front's registry (already on ``app.state``) and the front counts
its requests; an app built alone gets its own registry and a counting
middleware (:func:`install_metrics`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CollectorRegistry

from magnetar.web.metrics_registry import BrokerStatsCollector, build_registry, exposition

router = APIRouter(tags=["metrics"])

__all__ = ["BrokerStatsCollector", "install_metrics", "router"]


def install_metrics(app: FastAPI, broker_service: Any) -> CollectorRegistry:
    existing: CollectorRegistry | None = getattr(app.state, "metrics_registry", None)
    if existing is not None:  # behind web.front: its registry, its request counting
        return existing
    registry, requests = build_registry(broker_service)
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
    body, content_type = exposition(request.app.state.metrics_registry)
    return Response(content=body, media_type=content_type)
