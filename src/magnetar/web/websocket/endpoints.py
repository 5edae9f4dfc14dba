"""The WebSocket API's endpoints, without FastAPI: one coroutine per path shape.

Theory of operation: each endpoint takes a Starlette ``WebSocket`` (whose
``app.state.broker_service`` is the broker) and the path parameters, builds a
session (``producer``, ``consumer``) from them and the query string and hands
it to ``session.run_session``.  Two callers: the FastAPI router of this
package (``websocket.router``, once the full web app is built) and the
start-up front (``web.front``), which matches a ``/ws/...`` path with
:func:`match` and serves the connection before -- and without -- FastAPI.
``webSocketServiceEnabled`` (Pulsar's key; true in standalone, as in Pulsar's
standalone.conf) turns the endpoints off when false: the upgrade is then
refused with 404.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.websockets import WebSocket

from magnetar.web.websocket.consumer import ConsumerSession, MultiTopicConsumerSession, ReaderSession
from magnetar.web.websocket.producer import ProducerSession
from magnetar.web.websocket.session import BadParameter, QueryParams, Session, deny, run_session

DOMAINS = ("persistent", "non-persistent")


def broker(ws: WebSocket) -> Any:
    """The broker service (``broker.service.api.WebBrokerView``) of the app serving ``ws``."""
    return ws.app.state.broker_service


def _enabled(ws: WebSocket) -> bool:
    config = getattr(broker(ws), "config", None)
    props = config.as_properties() if config is not None and hasattr(config, "as_properties") else {}
    return str(props.get("webSocketServiceEnabled", "true")).strip().lower() != "false"


async def _serve(
    ws: WebSocket, domain: str, build: Callable[[str, QueryParams], Session], *names: str
) -> None:
    if not _enabled(ws):
        await deny(ws, 404, "The WebSocket service is not enabled on this broker")
        return
    if domain not in DOMAINS:
        await deny(ws, 400, f"Invalid topic domain {domain!r}: expected persistent or non-persistent")
        return
    tenant, namespace, topic = names
    full = f"{domain}://{tenant}/{namespace}/{topic}"
    try:
        session = build(full, QueryParams(dict(ws.query_params)))
    except BadParameter as exc:
        await deny(ws, 400, str(exc))
        return
    await run_session(ws, session)


async def ws_producer(ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
    svc = broker(ws)
    await _serve(ws, domain, lambda t, p: ProducerSession(ws, svc, t, p), tenant, namespace, topic)


async def ws_consumer(
    ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str, subscription: str
) -> None:
    svc = broker(ws)
    await _serve(
        ws, domain, lambda t, p: ConsumerSession(ws, svc, t, p, subscription), tenant, namespace, topic
    )


async def ws_reader(ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
    svc = broker(ws)
    await _serve(ws, domain, lambda t, p: ReaderSession(ws, svc, t, p), tenant, namespace, topic)


async def ws_multi_consumer(ws: WebSocket, subscription: str) -> None:
    if not _enabled(ws):
        await deny(ws, 404, "The WebSocket service is not enabled on this broker")
        return
    svc = broker(ws)
    role = (ws.scope.get("state") or {}).get("auth_role")
    try:
        session = MultiTopicConsumerSession(ws, svc, QueryParams(dict(ws.query_params)), subscription, role)
    except BadParameter as exc:
        await deny(ws, 400, str(exc))
        return
    await run_session(ws, session)


async def ws_pingpong(ws: WebSocket) -> None:
    """Keep-alive check: the server answers protocol ping frames (the ASGI server does that)."""
    await ws.accept()
    while (await ws.receive())["type"] != "websocket.disconnect":
        pass


_SEG = r"([^/]+)"
# (path regex, endpoint, parameter names): the router's paths, in its order.
PATHS: tuple[tuple[re.Pattern[str], Callable[..., Awaitable[None]], tuple[str, ...]], ...] = (
    (
        re.compile(rf"^/ws/v2/producer/{_SEG}/{_SEG}/{_SEG}/{_SEG}$"),
        ws_producer,
        ("domain", "tenant", "namespace", "topic"),
    ),
    (
        re.compile(rf"^/ws/v2/consumer/{_SEG}/{_SEG}/{_SEG}/{_SEG}/{_SEG}$"),
        ws_consumer,
        ("domain", "tenant", "namespace", "topic", "subscription"),
    ),
    (
        re.compile(rf"^/ws/v2/reader/{_SEG}/{_SEG}/{_SEG}/{_SEG}$"),
        ws_reader,
        ("domain", "tenant", "namespace", "topic"),
    ),
    (re.compile(rf"^/ws/v3/consumer/{_SEG}$"), ws_multi_consumer, ("subscription",)),
    (re.compile(r"^/ws/v2/pingpong$"), ws_pingpong, ()),
    (re.compile(r"^/ws/pingpong$"), ws_pingpong, ()),
)


def match(path: str) -> tuple[Callable[..., Awaitable[None]], dict[str, Any]] | None:
    """The endpoint and path parameters for ``path``, or None (not a WebSocket API path)."""
    for regex, endpoint, names in PATHS:
        m = regex.match(path)
        if m is not None:
            return endpoint, dict(zip(names, m.groups(), strict=True))
    return None
