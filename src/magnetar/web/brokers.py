"""Broker resources: ``/admin/v2/brokers/...`` (health, readiness, version).

Theory of operation: Pulsar's health check writes a message to a health-check
topic and reads it back.  Until the admin issue brings the full check, ours
exercises the path every client request takes first -- a topic lookup in the
``pulsar/system`` namespace, which reads namespace metadata from the store and
needs the service to be serving -- bounded by ``HEALTH_TIMEOUT_S``.  Success is
200 with the text ``ok``; failure or timeout a 500 with a reason.  ``/ready``
answers as soon as the app is mounted (it is mounted only after the broker
service has started), like Pulsar's.
"""

from __future__ import annotations

import asyncio
from importlib import metadata as importlib_metadata

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from magnetar.web.errors import WebError

router = APIRouter(tags=["brokers"])

HEALTH_TIMEOUT_S = 10.0
HEALTH_TOPIC = "persistent://pulsar/system/healthcheck"


@router.get("/admin/v2/brokers/health", response_class=PlainTextResponse)
async def health(request: Request, topicVersion: str | None = None) -> str:  # noqa: N803
    svc = request.app.state.broker_service
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            await svc.lookup(HEALTH_TOPIC)
    except TimeoutError:
        raise WebError(500, f"health check timed out after {HEALTH_TIMEOUT_S:g} s") from None
    return "ok"


@router.get("/admin/v2/brokers/ready", response_class=PlainTextResponse)
async def ready() -> str:
    return "ok"


@router.get("/admin/v2/brokers/version", response_class=PlainTextResponse)
async def version() -> str:
    try:
        return importlib_metadata.version("magnetar")
    except importlib_metadata.PackageNotFoundError:
        return "0.0.0"
