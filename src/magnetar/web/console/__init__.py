"""The built-in web console: ``/console`` on the broker's web port.

Theory of operation: the console is a static single page (``static/``:
``index.html``, ``console.css`` and hand-written ``*.js`` files, no build
step) served by :data:`router`.  The page holds no data of its own and asks
for none on the server's side: the browser signs in (a token or basic
credentials, kept in the tab's ``sessionStorage``; nothing when
authentication is off) and calls the admin REST API (``/admin/v2/...``)
itself with that ``Authorization`` header, so what a user sees and may do is
exactly what the API grants their role, and a refusal is shown as the API's
status and reason.  Live values are polled from the stats routes.

Two small helpers are served next to the page (see :mod:`.decode`):

* ``GET /console/api/policies`` -- the namespace policy table (field of the
  ``Policies`` document -> REST suffix and method), so the page edits a
  policy through the same route ``pulsar-admin`` would use;
* ``POST /console/api/decode`` -- decodes a payload the browser already
  fetched (peek) with a schema the browser already fetched (schema
  registry), e.g. Avro with fastavro.  It reads nothing from the broker, so
  it needs only an authenticated role.

The page, its assets and the policy table are public (``web/auth.py``: the
``/console`` rule); they carry no data.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from magnetar.web.console.decode import router as decode_router
from magnetar.web.errors import WebError

PREFIX = "/console"
# The assets shipped as package data, and their media types; nothing else is served.
ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "views.js": "text/javascript; charset=utf-8",
    "topic.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
}
# The page may change with the package; a short cache keeps reloads cheap and upgrades visible.
CACHE = {"Cache-Control": "no-cache"}

router = APIRouter(tags=["console"], include_in_schema=False)


def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


@router.get(PREFIX)
async def console_root() -> Response:
    return RedirectResponse(PREFIX + "/", status_code=307)


@router.get(PREFIX + "/")
async def console_page() -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8", headers=CACHE)


@router.get(PREFIX + "/static/{name}")
async def console_asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise WebError(404, f"no such console asset: {name[:100]}")
    return Response(_asset(name), media_type=media_type, headers=CACHE)


router.include_router(decode_router)

__all__ = ["router"]
