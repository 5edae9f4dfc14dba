"""Pulsar's WebSocket API on the broker's HTTP port (``/ws/v2/producer|consumer|reader/...``).

Theory of operation: one route per endpoint builds a session (``producer``,
``consumer``) from the path and query string and hands it to
``session.run_session``; the sessions speak JSON frames (``codec``) and reach
the broker only through ``broker_link.BrokerLink``.  ``webSocketServiceEnabled``
(Pulsar's key; true in standalone, as in Pulsar's standalone.conf) turns the
endpoints off when false: the upgrade is then refused with 404.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, WebSocket

from magnetar.web.deps import broker
from magnetar.web.websocket.consumer import ConsumerSession, MultiTopicConsumerSession, ReaderSession
from magnetar.web.websocket.producer import ProducerSession
from magnetar.web.websocket.session import BadParameter, QueryParams, Session, deny, run_session

router = APIRouter(tags=["websocket"])

DOMAINS = ("persistent", "non-persistent")


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


@router.websocket("/ws/v2/producer/{domain}/{tenant}/{namespace}/{topic}")
async def ws_producer(ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
    svc = broker(ws)
    await _serve(ws, domain, lambda t, p: ProducerSession(ws, svc, t, p), tenant, namespace, topic)


@router.websocket("/ws/v2/consumer/{domain}/{tenant}/{namespace}/{topic}/{subscription}")
async def ws_consumer(
    ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str, subscription: str
) -> None:
    svc = broker(ws)
    await _serve(
        ws, domain, lambda t, p: ConsumerSession(ws, svc, t, p, subscription), tenant, namespace, topic
    )


@router.websocket("/ws/v2/reader/{domain}/{tenant}/{namespace}/{topic}")
async def ws_reader(ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
    svc = broker(ws)
    await _serve(ws, domain, lambda t, p: ReaderSession(ws, svc, t, p), tenant, namespace, topic)


@router.websocket("/ws/v3/consumer/{subscription}")
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


@router.websocket("/ws/v2/pingpong")
@router.websocket("/ws/pingpong")
async def ws_pingpong(ws: WebSocket) -> None:
    """Keep-alive check: the server answers protocol ping frames (the ASGI server does that)."""
    await ws.accept()
    while (await ws.receive())["type"] != "websocket.disconnect":
        pass


__all__ = ["router"]
