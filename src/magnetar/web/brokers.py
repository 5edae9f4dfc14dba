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

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from magnetar.common.rest_models import BookieInfo
from magnetar.web.deps import admin, broker, no_content
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
                await broker(request).lookup(HEALTH_TOPIC)
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


# ---------------------------------------------------------------- broker list, leader, config, bookies
B = "/admin/v2/brokers"


@router.get(B)
async def list_brokers(request: Request) -> list[str]:
    return await admin(request).brokers.list_brokers()


@router.get(B + "/leaderBroker")
async def leader_broker(request: Request) -> dict:
    return await admin(request).brokers.leader()


@router.get(B + "/configuration")
async def dynamic_config_names(request: Request) -> list[str]:
    return admin(request).brokers.dynamic_names()


@router.get(B + "/configuration/values")
async def dynamic_config_values(request: Request) -> dict[str, str]:
    return await admin(request).brokers.overrides()


@router.get(B + "/configuration/runtime")
async def runtime_config(request: Request) -> dict[str, str]:
    return admin(request).brokers.runtime()


@router.post(B + "/configuration/{configName}/{configValue}", status_code=204)
async def update_dynamic_config(request: Request, configName: str, configValue: str) -> Response:  # noqa: N803
    await admin(request).brokers.update(configName, configValue)
    return no_content()


@router.delete(B + "/configuration/{configName}", status_code=204)
async def delete_dynamic_config(request: Request, configName: str) -> Response:  # noqa: N803
    await admin(request).brokers.delete(configName)
    return no_content()


@router.get(B + "/internal-configuration")
async def internal_configuration(request: Request) -> dict:
    return admin(request).brokers.internal_configuration()


@router.get(B + "/backlog-quota-check", status_code=204)
async def backlog_quota_check(request: Request) -> Response:
    await admin(request).enforcer.apply_all()
    return no_content()


@router.get(B + "/{cluster}")
async def list_cluster_brokers(request: Request, cluster: str) -> list[str]:
    return await admin(request).brokers.list_brokers(cluster)


@router.get(B + "/{cluster}/{broker}/ownedNamespaces")
async def owned_namespaces(request: Request, cluster: str, broker: str) -> dict:
    return await admin(request).brokers.owned_namespaces(cluster, broker)


@router.get("/admin/v2/bookies/all")
async def all_bookies(request: Request) -> dict:
    return await admin(request).brokers.bookies()


@router.get("/admin/v2/bookies/racks-info")
async def racks_info(request: Request) -> dict:
    return await admin(request).brokers.racks_info()


@router.get("/admin/v2/bookies/racks-info/{bookie}")
async def rack_info(request: Request, bookie: str) -> dict:
    return await admin(request).brokers.rack_info(bookie)


@router.post("/admin/v2/bookies/racks-info/{bookie}", status_code=204)
async def set_rack_info(
    request: Request, bookie: str, body: BookieInfo, group: str | None = None
) -> Response:
    await admin(request).brokers.set_rack_info(bookie, group, body.model_dump())
    return no_content()


@router.delete("/admin/v2/bookies/racks-info/{bookie}", status_code=204)
async def delete_rack_info(request: Request, bookie: str) -> Response:
    await admin(request).brokers.delete_rack_info(bookie)
    return no_content()
