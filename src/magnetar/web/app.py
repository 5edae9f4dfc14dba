"""The FastAPI application of a broker's web service.

Theory of operation: :func:`create_app` mounts one router per resource family
(the admin ones on first use: ``web.lazy_routers``) over a running broker service object (``magnetar.broker.service.BrokerService``
or anything with the same coroutine methods) and installs the error
translation and the metrics middleware.  The app is plain ASGI; the
composition root (``magnetar.app.standalone``) serves it with uvicorn inside
the broker's own event loop, behind the start-up front (``web.front``), which
builds it on the first request that needs it and hands it its ``state``
(admin service, metrics registry already made).  No state lives here beyond
``app.state``: ``broker_service``, ``admin``, the optional ``health_check``
and the metrics registry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI

from magnetar.web import lookup, metrics, websocket
from magnetar.web.auth import install_auth
from magnetar.web.deps import validate_path_names
from magnetar.web.errors import install_error_handlers
from magnetar.web.front import make_admin_service
from magnetar.web.lazy_routers import install_lazy_routers
from magnetar.web.ownership import install_ownership
from magnetar.web.plugins import install_web_interceptor

# Served from the start: what clients use (HTTP lookup, /metrics, the WebSocket API).
CORE_ROUTERS = (lookup.router, metrics.router, websocket.router)
# Built on the first request outside those (web.lazy_routers), in this order.  Order matters:
# the topic routes start with a ``{domain}`` segment, so every literal prefix (clusters,
# tenants, namespaces, schemas, brokers) is registered first.
ADMIN_ROUTER_MODULES = (
    "magnetar.web.tenancy",
    "magnetar.web.namespaces",
    "magnetar.web.schemas",
    "magnetar.web.brokers",
    "magnetar.web.resource_groups",  # /admin/v2/resourcegroups (broker.admin.resource_groups)
    "magnetar.web.load_balance",  # /admin/v2/broker-stats, brokers/shutdown (broker.loadbalance)
    "magnetar.web.compaction",
    "magnetar.web.offload",
    "magnetar.web.transactions",  # /admin/v3/transactions (transactions)
    "magnetar.web.topics",
    "magnetar.web.topic_policies",
    "magnetar.web.topic_admin",
    "magnetar.web.console",  # /console: the built-in web console (web/console/)
    "magnetar.web.functions",
)


def create_app(
    broker_service: Any,
    *,
    health_check: Callable[[], Awaitable[None]] | None = None,
    title: str = "magnetar broker",
    state: Any = None,
) -> FastAPI:
    """``health_check``: an async callable that raises when the broker cannot serve (see brokers.py).
    ``state``: the front's (``web.front.WebFront.state``), which becomes ``app.state``."""
    app = FastAPI(
        title=title,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        dependencies=[Depends(validate_path_names)],
    )
    if state is not None:
        app.state = state  # the front's: admin service and metrics registry made at start
    else:
        app.state.admin = make_admin_service(broker_service)
        app.state.health_check = health_check
    app.state.broker_service = broker_service
    install_error_handlers(app)
    install_ownership(app)  # 307 to a bundle's owner (before auth: auth wraps it and runs first)
    install_auth(app)  # authentication + per-route authorization (web/auth.py)
    install_web_interceptor(app, broker_service)  # only when brokerInterceptors is set (web/plugins.py)
    metrics.install_metrics(app, broker_service)
    for router in CORE_ROUTERS:
        app.include_router(router)
    install_lazy_routers(app, ADMIN_ROUTER_MODULES)  # last: its middleware is the outermost
    return app
