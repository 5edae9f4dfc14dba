"""The FastAPI application of a broker's web service.

Theory of operation: :func:`create_app` mounts one router per resource family
over a running broker service object (``magnetar.broker.service.BrokerService``
or anything with the same coroutine methods) and installs the error
translation and the metrics middleware.  The app is plain ASGI; the
composition root (``magnetar.app.standalone``) serves it with uvicorn inside
the broker's own event loop.  No state lives here beyond ``app.state``:
``broker_service``, the optional ``health_check`` and the app's own metrics
registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI

from magnetar.broker.admin.service import AdminService
from magnetar.web import (
    brokers,
    compaction,
    functions,
    lookup,
    metrics,
    namespaces,
    offload,
    schemas,
    tenancy,
    topic_admin,
    topic_policies,
    topics,
    transactions,
    websocket,
)
from magnetar.web import console as web_console
from magnetar.web.auth import install_auth
from magnetar.web.errors import install_error_handlers
from magnetar.web.paths import validate_path_names
from magnetar.web.plugins import install_web_interceptor

# Order matters: the topic routes start with a ``{domain}`` segment, so every literal
# prefix (clusters, tenants, namespaces, schemas, brokers) is registered first.
ROUTERS = (
    lookup.router,
    tenancy.router,
    namespaces.router,
    schemas.router,
    brokers.router,
    metrics.router,
    compaction.router,
    offload.router,
    transactions.router,  # /admin/v3/transactions (transactions)
    topics.router,
    topic_policies.router,
    topic_admin.router,
    web_console.router,  # /console: the built-in web console (web/console/)
    websocket.router,
    functions.router,
)


def create_app(
    broker_service: Any,
    *,
    health_check: Callable[[], Awaitable[None]] | None = None,
    title: str = "magnetar broker",
) -> FastAPI:
    """``health_check``: an async callable that raises when the broker cannot serve (see brokers.py)."""
    app = FastAPI(
        title=title,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        dependencies=[Depends(validate_path_names)],
    )
    app.state.broker_service = broker_service
    # A bare fake service (unit tests of lookup/partitions) has no metadata resources.
    has_admin = hasattr(broker_service, "resources") and hasattr(broker_service, "metadata_store")
    app.state.admin = AdminService(broker_service) if has_admin else None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # built outside a loop (unit tests): no enforcement loop
    else:
        if app.state.admin is not None:
            app.state.admin.start()
    app.state.health_check = health_check
    install_error_handlers(app)
    install_auth(app)  # authentication + per-route authorization (web/auth.py)
    install_web_interceptor(app, broker_service)  # only when brokerInterceptors is set (web/plugins.py)
    metrics.install_metrics(app, broker_service)
    for router in ROUTERS:
        app.include_router(router)
    return app
