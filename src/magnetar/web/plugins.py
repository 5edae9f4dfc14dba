"""The web side of the broker's extension points: the web-request interceptor hook and
additional servlets.

Theory of operation: :func:`install_web_interceptor` adds a pure-ASGI
middleware only when the broker has an interceptor (``brokerInterceptors``
set), so an unconfigured broker's HTTP path is untouched.  The middleware
calls ``on_web_request(method, path, headers)`` before the request reaches
authentication and the routes; a returned status refuses the request with
``{"reason": "refused by a broker interceptor"}``.  :func:`mount_servlets`
mounts each additional servlet's ASGI app at its ``base_path`` and lists the
path in ``app.state.servlet_paths``: with authorization on, the broker's
authorization middleware lets any authenticated role through to a servlet
(the servlet decides the rest), as Pulsar's web filter does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from fastapi import FastAPI

from magnetar.web.errors import reason

log = logging.getLogger(__name__)


class _InterceptorMiddleware:
    def __init__(self, app: ASGIApp, interceptor: Any) -> None:
        self.app = app
        self.interceptor = interceptor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or ()}
            method = scope.get("method", "WEBSOCKET")
            status = self.interceptor.on_web_request(method, scope.get("path", ""), headers)
            if status is not None:
                if scope["type"] == "websocket":
                    await send(
                        {"type": "websocket.close", "code": 1008, "reason": "refused by a broker interceptor"}
                    )
                else:
                    await reason(int(status), "refused by a broker interceptor")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def install_web_interceptor(app: FastAPI, broker_service: Any) -> None:
    interceptor = getattr(broker_service, "interceptor", None)
    if interceptor is not None:
        app.add_middleware(_InterceptorMiddleware, interceptor=interceptor)


def mount_servlets(app: FastAPI, servlets: list[tuple[str, Any]], broker_service: Any) -> None:
    for name, servlet in servlets:
        path = servlet.base_path.rstrip("/")
        app.mount(path, servlet.asgi_app(broker_service), name=f"servlet:{name}")
        app.state.servlet_paths = (*getattr(app.state, "servlet_paths", ()), path)
        log.info("additional servlet %s mounted at %s", name, path)
