"""The admin routers are built on the first request outside the core paths (web.lazy_routers):
before it, their modules are not even imported; after it, the route table is the one an eager
build gives, in the same order, and servlets mounted earlier still come after them."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from fastapi import FastAPI
from fastapi.testclient import TestClient

from magnetar.web.app import ADMIN_ROUTER_MODULES, CORE_ROUTERS, create_app
from magnetar.web.auth import iter_routes


def test_admin_modules_load_on_the_first_admin_request_only() -> None:
    script = textwrap.dedent(
        """
        import sys
        from types import SimpleNamespace
        from fastapi.testclient import TestClient
        from magnetar.web.app import ADMIN_ROUTER_MODULES, create_app

        heavy = ADMIN_ROUTER_MODULES + ("magnetar.functions.worker", "jwt", "fastavro", "lz4")
        app = create_app(SimpleNamespace())
        assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
        client = TestClient(app, raise_server_exceptions=False)
        client.get("/metrics")  # a core path: nothing more is loaded
        assert not [m for m in ADMIN_ROUTER_MODULES if m in sys.modules]
        client.get("/admin/v2/clusters")
        assert all(m in sys.modules for m in ADMIN_ROUTER_MODULES)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def _paths(app) -> list[str]:
    return [getattr(r, "path", "") for r in iter_routes(app.router.routes)]


def test_route_order_is_the_eager_order_and_mounts_stay_last() -> None:
    app = create_app(SimpleNamespace())
    core = _paths(app)
    app.mount("/servlet-x", lambda scope, receive, send: None, name="servlet:x")
    TestClient(app, raise_server_exceptions=False).get("/admin/v2/tenants")
    paths = _paths(app)
    assert paths[-1] == "/servlet-x"
    # The same table as including every router at once, in the old order (core first).
    eager = FastAPI(docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    for router in CORE_ROUTERS:
        eager.include_router(router)
    for name in ADMIN_ROUTER_MODULES:
        eager.include_router(importlib.import_module(name).router)
    assert paths[:-1] == _paths(eager)
    assert paths[: len(core)] == core and len(paths) > len(core) + 100
    # A second request loads nothing again.
    TestClient(app, raise_server_exceptions=False).get("/admin/v2/tenants")
    assert _paths(app) == paths


def test_background_load_gives_the_same_table_and_yields_between_modules() -> None:
    import asyncio

    from magnetar.web.lazy_routers import LazyRouters

    app = create_app(SimpleNamespace())
    routers: LazyRouters = app.state.lazy_routers
    turns = 0

    async def run() -> None:
        nonlocal turns
        task = asyncio.create_task(routers.load_in_background(0.0))
        while not task.done():
            turns += 1  # the loop ran something else between two imports
            await asyncio.sleep(0)
        await task

    asyncio.run(run())
    assert routers.loaded
    assert turns >= 2
    eager = create_app(SimpleNamespace())
    TestClient(eager, raise_server_exceptions=False).get("/admin/v2/tenants")  # loads on request
    assert _paths(app) == _paths(eager)
