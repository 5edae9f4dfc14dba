"""Load-management resources: ``/admin/v2/broker-stats/...`` and ``POST /admin/v2/brokers/shutdown``.

Theory of operation: thin handlers over :class:`~magnetar.broker.loadbalance.admin.LoadAdmin`
(built once per app, on first use): the load report (LocalBrokerData), the
per-namespace/bundle topic stats, allocator stats, the load manager's decisions
(``/admin/v2/broker-stats/load-decisions``, a Magnetar addition: why each bundle
moved) and the graceful shutdown, which answers 204 at once and drains in the
background: every owned bundle is unloaded, then the process stops (the
composition root puts its ``request_stop`` in ``app.state``).  All super-user only (``web/auth.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from magnetar.broker.loadbalance.admin import LoadAdmin
from magnetar.web.deps import no_content

router = APIRouter(tags=["broker-stats"])
BS = "/admin/v2/broker-stats"


def _load_admin(request: Request) -> LoadAdmin:
    la = getattr(request.app.state, "load_admin", None)
    if la is None:
        la = request.app.state.load_admin = LoadAdmin(request.app.state.broker_service)
    return la


@router.get(BS + "/load-report")
async def load_report(request: Request) -> dict:
    return await _load_admin(request).load_report()


@router.get(BS + "/topics")
async def topics(request: Request) -> dict:
    return await _load_admin(request).topics()


@router.get(BS + "/allocator-stats/{allocator}")
async def allocator_stats(request: Request, allocator: str) -> dict:
    return _load_admin(request).allocator_stats(allocator)


@router.get(BS + "/load-decisions")
async def load_decisions(request: Request) -> dict:
    return _load_admin(request).decisions()


@router.post("/admin/v2/brokers/shutdown", status_code=204)
async def shutdown(
    request: Request,
    maxConcurrentUnloadPerSec: int | None = None,  # noqa: N803
    forcedTerminateTopic: bool = True,  # noqa: N803  (topics are always closed, never terminated)
) -> Response:
    stop = getattr(request.app.state, "request_stop", None)
    rate = (
        float(maxConcurrentUnloadPerSec)
        if maxConcurrentUnloadPerSec and maxConcurrentUnloadPerSec > 0
        else None
    )
    _load_admin(request).shutdown(stop, rate)
    return no_content()
