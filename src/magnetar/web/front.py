"""The web service's start-up front: plain ASGI for what must answer at once, FastAPI on demand.

Theory of operation: FastAPI, pydantic and the admin routers are the largest
part of a broker's start-up imports and of its idle memory, and a broker that
only moves messages never needs them.  So the HTTP server (uvicorn, started by
the composition root) serves a :class:`WebFront`, which answers by itself,
without importing FastAPI:

* ``GET /metrics`` (the registry of ``metrics_registry``, built here at start),
* ``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}[/bundle]``
  (HTTP lookup, same answers and redirects as ``web.lookup``),
* ``GET /admin/v2/brokers/ready`` (the readiness probe: ``ok``),
* the WebSocket API ``/ws/...`` (``websocket.endpoints``),

and hands every other request to the full FastAPI app (``web.app.create_app``),
which it builds on the first such request -- once: concurrent first requests
wait for the one build (:attr:`_lock`); the router modules are imported one per
event-loop turn, so binary-protocol clients keep being served meanwhile.  A
failed build answers that request 500 ``{"reason": ...}`` and the next one
tries again.  Once built, the app serves *every* request (the fast paths
included), so from then on behaviour is exactly the app's.

The fast paths are taken only where they are the app's behaviour: not when
authentication or authorization is on (the app's auth middleware decides,
``web.auth``), not with a broker interceptor (``web.plugins``); anything not
exactly one of the shapes above (another method, an unusual query value, a name
``paths.check_path_names`` refuses) goes to the app, which gives its own
answer.  Additional servlets need the app at once: the composition root calls
:meth:`build_now`.  :meth:`build_in_background` builds it after a delay
(``magnetarAdminRoutesPreloadDelayMs``; off by default: the idle broker then
holds no FastAPI).

State shared with the app: :attr:`state` *is* the app's ``app.state`` (broker
service, admin service, health check, metrics registry, and what the
composition root adds: ``request_stop``, ``functions_worker``,
``tls_peer_lookup``).  The admin service (``broker.admin``: the policy
enforcer, dynamic configuration) is made and started here, at start, as
before.  HTTP requests are counted here (``magnetar_http_requests``), for the
app's requests too.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from magnetar.broker import errors as broker_errors
from magnetar.broker.service.names import parse_topic
from magnetar.web.errors import WebError
from magnetar.web.metrics_registry import build_registry, exposition
from magnetar.web.paths import check_path_names, topic_name

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# Imported one per loop turn before the app is built (the build itself then finds them loaded).
APP_MODULES = ("fastapi", "magnetar.web.app")
LOOKUP_KEYS = ("brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl")  # as web.lookup
_LOOKUP = re.compile(r"^/lookup/v2/topic/([^/]+)/([^/]+)/([^/]+)/([^/]+?)(/bundle)?$")
_METRICS = ("/metrics", "/metrics/")
_READY = "/admin/v2/brokers/ready"
# pydantic's bool parsing of ``?authoritative=`` (anything else: the app answers its 400)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"


class FrontState:
    """Attribute bag shared with the FastAPI app (``app.state``); missing names raise AttributeError."""


def make_admin_service(broker_service: Any) -> Any:
    """The broker's ``AdminService`` (started when a loop runs), or None for a bare service."""
    if not (hasattr(broker_service, "resources") and hasattr(broker_service, "metadata_store")):
        return None  # a bare fake service (unit tests of lookup/partitions) has no metadata resources
    from magnetar.broker.admin.service import AdminService

    admin = AdminService(broker_service)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return admin  # built outside a loop (unit tests): no enforcement loop
    admin.start()
    return admin


class WebFront:
    def __init__(
        self,
        broker_service: Any,
        *,
        health_check: Callable[[], Awaitable[None]] | None = None,
        title: str = "magnetar broker",
    ) -> None:
        self.title = title
        self.state = FrontState()
        self.state.broker_service = broker_service
        self.state.health_check = health_check
        self.state.admin = make_admin_service(broker_service)
        registry, self._requests = build_registry(broker_service)
        self.state.metrics_registry = registry
        self.app: Any = None  # the FastAPI app, once built
        self.build_s: float | None = None  # how long the build took (logged)
        self._lock = asyncio.Lock()

    # --- the full app ----------------------------------------------------------------------------

    def _create(self) -> Any:
        from magnetar.web.app import create_app
        from magnetar.web.lazy_routers import load_all

        app = create_app(
            self.state.broker_service,
            health_check=self.state.health_check,
            title=self.title,
            state=self.state,
        )
        load_all(app)  # a request needs the app: the admin routes with it
        return app

    def build_now(self) -> Any:
        """Build the app synchronously (additional servlets mount on it before serving)."""
        if self.app is None:
            t0 = time.perf_counter()
            self.app = self._create()
            self.build_s = time.perf_counter() - t0
        return self.app

    async def full_app(self) -> Any:
        """The app, built by the first caller; the others wait for that build."""
        if self.app is not None:
            return self.app
        async with self._lock:
            if self.app is None:
                t0 = time.perf_counter()
                from magnetar.web.app import ADMIN_ROUTER_MODULES

                for name in (*APP_MODULES, *ADMIN_ROUTER_MODULES):
                    importlib.import_module(name)
                    await asyncio.sleep(0)  # serve the binary protocol between the imports
                self.app = self._create()
                self.build_s = time.perf_counter() - t0
                log.info("web app built on first use (%.0f ms)", self.build_s * 1000)
        return self.app

    async def build_in_background(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        try:
            await self.full_app()
        except Exception:
            log.exception("building the web app in the background failed (the next admin request retries)")

    # --- ASGI -------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        elif self.app is not None:  # lifespan (the composition roots turn it off)
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = 500

        async def counting_send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            if self.app is None and self._fast_paths() and await self._fast_http(scope, counting_send):
                return
            try:
                app = await self.full_app()
            except Exception as exc:
                log.exception("building the web app failed")
                await _respond(
                    counting_send, 500, _reason(f"the broker's web service could not be built: {exc}"), _JSON
                )
                return
            await app(scope, receive, counting_send)
        finally:
            self._requests.labels(scope.get("method", ""), f"{status // 100}xx").inc()

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is None and self._fast_paths():
            from magnetar.web.websocket import endpoints

            found = endpoints.match(str(scope.get("path", "")))
            if found is not None and _names_ok(found[1]):
                from starlette.websockets import WebSocket

                scope["app"] = self
                endpoint, params = found
                await endpoint(WebSocket(scope, receive, send), **params)
                return
        try:
            app = await self.full_app()
        except Exception:
            log.exception("building the web app failed")
            await send({"type": "websocket.close", "code": 1011, "reason": "web service unavailable"})
            return
        await app(scope, receive, send)

    def _fast_paths(self) -> bool:
        """Whether the front may answer by itself: no auth, no interceptor (see the module doc)."""
        svc = self.state.broker_service
        if getattr(svc, "interceptor", None) is not None:
            return False
        for part in ("authentication", "authorization"):
            if getattr(getattr(svc, part, None), "enabled", False):
                return False
        return True

    async def _fast_http(self, scope: Scope, send: Send) -> bool:
        """Answer a fast-path request; False = not one, the app answers it."""
        if scope.get("method") != "GET":
            return False
        path = str(scope.get("path", ""))
        if path in _METRICS:
            body, content_type = exposition(self.state.metrics_registry)
            await _respond(send, 200, body, content_type)
            return True
        if path == _READY:
            await _respond(send, 200, b"ok", _TEXT)
            return True
        m = _LOOKUP.match(path)
        if m is None:
            return False
        params = dict(zip(("domain", "tenant", "namespace", "topic"), m.groups()[:4], strict=True))
        if not _names_ok(params):
            return False
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        flags = [v.lower() for k, v in query if k == "authoritative"]
        if flags and flags[-1] not in _TRUE | _FALSE:
            return False
        authoritative = bool(flags) and flags[-1] in _TRUE
        try:
            if m.group(5):
                await self._bundle(send, params)
            else:
                await self._lookup(scope, send, params, authoritative, query)
        except (WebError, broker_errors.BrokerError) as exc:
            status = int(getattr(exc, "http_status", 500) or 500)
            await _respond(send, status, _reason(str(getattr(exc, "message", "") or exc)), _JSON)
        except Exception as exc:
            log.exception("internal error serving GET %s", path)
            await _respond(send, 500, _reason(f"internal error: {exc}"), _JSON)
        return True

    async def _bundle(self, send: Send, params: dict[str, str]) -> None:
        svc = self.state.broker_service
        bundle = await svc.namespace_service.bundle_of(parse_topic(topic_name(**params)))
        await _respond(send, 200, bundle.range.name.encode(), _TEXT)

    async def _lookup(
        self, scope: Scope, send: Send, params: dict[str, str], authoritative: bool, query: list[Any]
    ) -> None:
        svc = self.state.broker_service
        name = topic_name(**params)
        lookup_topic = getattr(svc, "lookup_topic", None)
        if lookup_topic is None:  # a bare service (unit tests of the web layer): always here
            answer = dict(await svc.lookup(name))
        else:
            result = await lookup_topic(name, authoritative)
            if result.redirect:  # 307 to the owner, as web.ownership.redirect_to
                base = urlsplit(result.owner.http_url)
                kept = [(k, v) for k, v in query if k != "authoritative"] + [("authoritative", "true")]
                path = str(scope.get("root_path", "")) + str(scope["path"])
                location = f"{base.scheme}://{base.netloc}{path}?{urlencode(kept)}"
                body = _reason(f"redirected to {result.owner.http_url}")
                await _respond(send, 307, body, _JSON, [(b"location", location.encode("latin-1"))])
                return
            answer = result.as_lookup_data()
        for key in LOOKUP_KEYS:  # the cpp client insists on every key being present
            answer.setdefault(key, answer.get("brokerUrl") if key == "nativeUrl" else None)
        await _respond(send, 200, _json(answer), _JSON)


def _names_ok(params: dict[str, str]) -> bool:
    try:
        check_path_names(params)
    except WebError:
        return False  # the app answers (its 412)
    return True


def _json(content: Any) -> bytes:
    """As Starlette's JSONResponse renders."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode()


def _reason(message: str) -> bytes:
    return _json({"reason": message})


async def _respond(
    send: Send, status: int, body: bytes, content_type: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    raw = [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", content_type.encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
