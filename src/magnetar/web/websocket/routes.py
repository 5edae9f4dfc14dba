"""The FastAPI router of the WebSocket API: one route per endpoint of ``endpoints``.

Theory of operation: used once the full web app is built (``web.app``); the
routes only hand the connection and path parameters to ``endpoints``, which
the start-up front (``web.front``) calls directly before that.
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from magnetar.web.websocket import endpoints

router = APIRouter(tags=["websocket"])

DOMAINS = endpoints.DOMAINS


@router.websocket("/ws/v2/producer/{domain}/{tenant}/{namespace}/{topic}")
async def ws_producer(ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
    await endpoints.ws_producer(ws, domain, tenant, namespace, topic)


@router.websocket("/ws/v2/consumer/{domain}/{tenant}/{namespace}/{topic}/{subscription}")
async def ws_consumer(
    ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str, subscription: str
) -> None:
    await endpoints.ws_consumer(ws, domain, tenant, namespace, topic, subscription)


@router.websocket("/ws/v2/reader/{domain}/{tenant}/{namespace}/{topic}")
async def ws_reader(ws: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
    await endpoints.ws_reader(ws, domain, tenant, namespace, topic)


@router.websocket("/ws/v3/consumer/{subscription}")
async def ws_multi_consumer(ws: WebSocket, subscription: str) -> None:
    await endpoints.ws_multi_consumer(ws, subscription)


@router.websocket("/ws/v2/pingpong")
@router.websocket("/ws/pingpong")
async def ws_pingpong(ws: WebSocket) -> None:
    await endpoints.ws_pingpong(ws)


__all__ = ["router"]
