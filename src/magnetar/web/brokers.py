"""Broker resources: ``/admin/v2/brokers/...`` (health, readiness, version).

Theory of operation: Pulsar's health check writes a message to a health-check
topic and reads it back.  The composition root passes such a check to
``create_app`` (``health_check``: an async callable raising on failure;
``magnetar.app.healthcheck`` does the produce/read round trip over the binary
port).  Without one -- an app over a bare service, as in unit tests -- the
check falls back to a topic lookup in ``pulsar/system`` (metadata readable,
service serving).  Either way it is bounded by ``HEALTH_TIMEOUT_S``; success is
200 with the text ``ok``, failure or timeout a 500 with the reason.  ``/ready``
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
    check = request.app.state.health_check
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S + 1):
            if check is not None:
                await check()
            else:
                await request.app.state.broker_service.lookup(HEALTH_TOPIC)
    except TimeoutError:
        raise WebError(500, f"health check timed out after {HEALTH_TIMEOUT_S:g} s") from None
    except WebError:
        raise
    except Exception as exc:  # the check's own error type belongs to the composition root
        if getattr(exc, "http_status", None):
            raise
        raise WebError(500, f"health check failed: {exc}") from None
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
