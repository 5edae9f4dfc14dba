"""The FastAPI application of a broker's web service.

Theory of operation: :func:`create_app` mounts one router per resource family
over a running broker service object (``magnetar.broker.service.BrokerService``
or anything with the same coroutine methods) and installs the error
translation and the metrics middleware.  The app is plain ASGI; the
composition root (``magnetar.app.standalone``) serves it with uvicorn inside
the broker's own event loop.  No state lives here beyond ``app.state``:
``broker_service`` and the app's own metrics registry.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from magnetar.web import brokers, lookup, metrics, namespaces, schemas, topics
from magnetar.web.errors import install_error_handlers

ROUTERS = (lookup.router, topics.router, namespaces.router, schemas.router, brokers.router, metrics.router)


def create_app(broker_service: Any, *, title: str = "magnetar broker") -> FastAPI:
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.broker_service = broker_service
    install_error_handlers(app)
    metrics.install_metrics(app, broker_service)
    for router in ROUTERS:
        app.include_router(router)
    return app
