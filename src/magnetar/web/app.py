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

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI

from magnetar.web import brokers, lookup, metrics, namespaces, schemas, topics
from magnetar.web.errors import install_error_handlers

ROUTERS = (lookup.router, topics.router, namespaces.router, schemas.router, brokers.router, metrics.router)


def create_app(
    broker_service: Any,
    *,
    health_check: Callable[[], Awaitable[None]] | None = None,
    title: str = "magnetar broker",
) -> FastAPI:
    """``health_check``: an async callable that raises when the broker cannot serve (see brokers.py)."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.broker_service = broker_service
    app.state.health_check = health_check
    install_error_handlers(app)
    metrics.install_metrics(app, broker_service)
    for router in ROUTERS:
        app.include_router(router)
    return app
