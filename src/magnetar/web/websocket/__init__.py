"""Pulsar's WebSocket API on the broker's HTTP port (``/ws/v2/producer|consumer|reader/...``).

Theory of operation: the endpoints live in ``endpoints`` (no FastAPI there:
the start-up front, ``web.front``, serves them before the FastAPI app exists,
so importing this package must not import FastAPI); ``routes`` is their
FastAPI router, used once the full web app is built (``router`` here is that
router, imported on first access).  The sessions speak JSON frames
(``codec``) and reach the broker only through ``broker_link.BrokerLink``.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "router":
        from magnetar.web.websocket.routes import router

        return router
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
