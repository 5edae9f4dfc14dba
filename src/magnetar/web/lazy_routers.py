"""The admin routers, built on the first request that may need them.

Theory of operation: importing a router module builds its routes -- FastAPI
makes the request/response models and validators of every endpoint then --
which is most of the web service's start-up time and a good share of its idle
memory, and a broker that only moves messages never uses them.  So
``create_app`` mounts the routes a client uses from the first second (HTTP
lookup, ``/metrics``, the WebSocket API) and hands the rest, as module names
in their registration order, to a :class:`LazyRouters`.  Its middleware, the
outermost layer of the app, loads them all (once, synchronously, before the
request goes on) on the first HTTP or WebSocket request whose path is not one
of ``CORE_PREFIXES``; :func:`load_all` does the same for code that walks the
route table (``web.auth.route_table``, tests).  Loaded routes go where they
would have been had they been included at start: after the core routes and
before anything mounted later (additional servlets), so matching order is
unchanged.  Nothing else changes: the first admin request pays the import
(a fraction of a second on an idle machine, seconds on a busy one), every
later one nothing.

The standalone goes further: its HTTP server serves ``web.front``, which
builds this whole app (FastAPI included) on the first request that needs it
and then loads the routers at once (:func:`load_all`).  An app built alone
(unit tests, other composition roots) keeps the lazy loading described here;
:meth:`LazyRouters.load_in_background` imports the router modules one per
event-loop turn -- requests in between are served -- and then loads them.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

# Paths served by the routes mounted at start-up: they never trigger the load.
CORE_PREFIXES = ("/metrics", "/lookup/", "/ws/")
DEFAULT_PRELOAD_DELAY_S = 1.0


class LazyRouters:
    def __init__(self, app: FastAPI, modules: tuple[str, ...]) -> None:
        self.app = app
        self.modules = modules
        self.loaded = False
        self._insert_at = len(app.router.routes)  # the core routes end here

    def load(self) -> None:
        if self.loaded:
            return
        self.loaded = True
        t0 = time.perf_counter()
        routes = self.app.router.routes
        before = len(routes)
        for name in self.modules:
            self.app.include_router(importlib.import_module(name).router)
        added = routes[before:]
        del routes[before:]
        routes[self._insert_at : self._insert_at] = added
        self.app.openapi_schema = None  # built again with every route
        log.info("admin routes loaded (%d routes, %.0f ms)", len(added), (time.perf_counter() - t0) * 1000)

    async def load_in_background(self, delay_s: float = DEFAULT_PRELOAD_DELAY_S) -> None:
        """After ``delay_s``: import the router modules one per loop turn, then load them."""
        await asyncio.sleep(delay_s)
        for name in self.modules:
            if self.loaded:
                return
            importlib.import_module(name)
            await asyncio.sleep(0)
        self.load()


def load_all(app: FastAPI) -> None:
    """Make every route of the app present now (route-table walkers call this first)."""
    lazy = getattr(app.state, "lazy_routers", None)
    if lazy is not None:
        lazy.load()


class LazyRoutersMiddleware:
    """Pure ASGI: the first request outside ``CORE_PREFIXES`` loads the deferred routers."""

    def __init__(self, app: ASGIApp, routers: LazyRouters) -> None:
        self.app = app
        self.routers = routers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not self.routers.loaded
            and scope["type"] in ("http", "websocket")
            and not str(scope.get("path", "")).startswith(CORE_PREFIXES)
        ):
            self.routers.load()
        await self.app(scope, receive, send)


def install_lazy_routers(app: FastAPI, modules: tuple[str, ...]) -> Any:
    """Call last in ``create_app``: the middleware must be outermost (it runs before auth
    looks routes up)."""
    routers = LazyRouters(app, modules)
    app.state.lazy_routers = routers
    app.add_middleware(LazyRoutersMiddleware, routers=routers)
    return routers
