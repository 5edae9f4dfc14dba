"""Admin REST of Pulsar Functions and Pulsar IO: ``/admin/v3/functions|sources|sinks``.

Theory of operation: thin handlers over the functions worker that the hosting
process put on ``app.state.functions_worker`` -- a handle whose ``await
get()`` gives the worker, started by the first request that needs it
(``app.functions_worker``); ``None`` -> 503, the worker is not enabled.  The three families share one set of routes, as Pulsar's
``FunctionsApiV3Resource``/``SourcesApiV3Resource``/``SinksApiV3Resource`` do:
create (POST) and update (PUT) take ``multipart/form-data`` with the config
part (``functionConfig`` / ``sourceConfig`` / ``sinkConfig``, JSON) and the
code part ``data`` (or ``url: builtin://...`` for a built-in connector);
delete, get, list, status, stats, start/stop/restart (whole or one instance),
trigger (``data`` + optional ``topic``), state (GET, POST ``state`` form field
with ``{"key", "stringValue"|"numberValue"|"byteValue"}``) and download; and
Pulsar's ``/admin/v2/worker/cluster`` (the workers) and ``.../cluster/leader``.
An instance's status is asked of the worker running it (header
``X-Magnetar-Worker-Forwarded`` marks the forwarded call, answered locally).

``POST .../state/{key}/incr`` (``{"amount": n}``) and ``DELETE .../state/{key}``
are Magnetar's: the instances' ``incr_counter``/``del_counter`` use them.
Multipart bodies are parsed with the standard library's email parser (no extra
dependency), bounded by ``BODY_BYTES_MAX``.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import urllib.parse
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from magnetar.functions.status import FORWARDED_HEADER
from magnetar.functions.worker import WorkerError
from magnetar.web.errors import WebError

router = APIRouter(tags=["functions"])

BODY_BYTES_MAX = 20 * 1024 * 1024
FAMILIES = {
    "functions": (None, "functionConfig"),
    "sources": ("source", "sourceConfig"),
    "sinks": ("sink", "sinkConfig"),
}
BASE = "/admin/v3/{family}/{tenant}/{namespace}"
ONE = BASE + "/{name}"


async def _worker(request: Request, family: str) -> Any:
    if family not in FAMILIES:
        raise WebError(404, f"unknown resource {family!r}")
    handle = getattr(request.app.state, "functions_worker", None)
    if handle is None:
        raise WebError(503, "Function worker service is not enabled")
    return await handle.get()


async def _call(coro: Any) -> Any:
    try:
        return await coro
    except WorkerError as exc:
        raise WebError(exc.status, exc.reason)


async def _form(request: Request) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, bytes) of a multipart/form-data or urlencoded body."""
    body = await request.body()
    if len(body) > BODY_BYTES_MAX:
        raise WebError(413, f"the request body is larger than {BODY_BYTES_MAX} bytes")
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("application/x-www-form-urlencoded"):
        return {k: (None, v[0].encode()) for k, v in urllib.parse.parse_qs(body.decode()).items()}
    if ctype.startswith("application/json"):
        return {"__json__": (None, body)}
    if not ctype.startswith("multipart/form-data"):
        raise WebError(415, "expected multipart/form-data")
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {ctype}\r\n\r\n".encode() + body
    )
    if not msg.is_multipart():
        raise WebError(400, "malformed multipart body")
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            out[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return out


def _config_doc(form: dict[str, tuple[str | None, bytes]], key: str, required: bool) -> dict[str, Any]:
    raw = form.get(key) or form.get("__json__")
    if raw is None:
        if required:
            raise WebError(400, f"{key} is required")
        return {}
    try:
        doc = json.loads(raw[1])
    except ValueError:
        raise WebError(400, f"{key} is not valid JSON")
    if not isinstance(doc, dict):
        raise WebError(400, f"{key} must be a JSON object")
    return doc


def _code(form: dict[str, tuple[str | None, bytes]], doc: dict[str, Any]) -> tuple[bytes | None, str | None]:
    url = form.get("url")
    if url is not None:
        text = url[1].decode()
        if not text.startswith("builtin://"):
            raise WebError(400, "only builtin:// package URLs are supported")
        doc.setdefault("archive", text)
    data = form.get("data")
    return (data[1], data[0]) if data else (None, None)


@router.post(ONE, status_code=204)
async def create(request: Request, family: str, tenant: str, namespace: str, name: str) -> Response:
    worker = await _worker(request, family)
    component, key = FAMILIES[family]
    form = await _form(request)
    doc = _config_doc(form, key, True)
    doc.update({"tenant": tenant, "namespace": namespace, "name": name})
    code, filename = _code(form, doc)
    await _call(worker.register(doc, code, filename, component))
    return Response(status_code=204)


@router.put(ONE, status_code=204)
async def update(request: Request, family: str, tenant: str, namespace: str, name: str) -> Response:
    worker = await _worker(request, family)
    form = await _form(request)
    doc = _config_doc(form, FAMILIES[family][1], False)
    code, filename = _code(form, doc)
    await _call(worker.update(tenant, namespace, name, doc, code, filename))
    return Response(status_code=204)


@router.delete(ONE, status_code=204)
async def delete(request: Request, family: str, tenant: str, namespace: str, name: str) -> Response:
    await _call((await _worker(request, family)).deregister(tenant, namespace, name))
    return Response(status_code=204)


@router.get(ONE)
async def get(request: Request, family: str, tenant: str, namespace: str, name: str) -> Any:
    return await _call((await _worker(request, family)).get(tenant, namespace, name))


@router.get(BASE)
async def list_(request: Request, family: str, tenant: str, namespace: str) -> Any:
    return await _call((await _worker(request, family)).list(tenant, namespace, FAMILIES[family][0]))


@router.get(ONE + "/status")
async def status(request: Request, family: str, tenant: str, namespace: str, name: str) -> Any:
    return await _call((await _worker(request, family)).status(tenant, namespace, name))


@router.get(ONE + "/{instance}/status")
async def instance_status(
    request: Request, family: str, tenant: str, namespace: str, name: str, instance: int
) -> Any:
    forwarded = bool(request.headers.get(FORWARDED_HEADER))  # from another worker: answer locally
    worker = await _worker(request, family)
    return await _call(worker.status(tenant, namespace, name, instance, forwarded=forwarded))


@router.get(ONE + "/stats")
async def stats(request: Request, family: str, tenant: str, namespace: str, name: str) -> Any:
    return await _call((await _worker(request, family)).stats(tenant, namespace, name))


@router.post(ONE + "/{action}", status_code=204)
async def lifecycle(
    request: Request, family: str, tenant: str, namespace: str, name: str, action: str
) -> Response:
    worker = await _worker(request, family)
    if action == "trigger":
        form = await _form(request)
        value = (form.get("data") or form.get("dataStream") or (None, b""))[1]
        topic = form.get("topic")
        result = await _call(
            worker.trigger(tenant, namespace, name, value, topic[1].decode() if topic else None)
        )
        return PlainTextResponse("" if result is None else str(result))
    if action not in ("start", "stop", "restart"):
        raise WebError(404, f"unknown action {action!r}")
    await _call(worker.set_running(tenant, namespace, name, None, action))
    return Response(status_code=204)


@router.post(ONE + "/{instance}/{action}", status_code=204)
async def instance_lifecycle(
    request: Request, family: str, tenant: str, namespace: str, name: str, instance: str, action: str
) -> Response:
    worker = await _worker(request, family)
    if instance == "state":  # POST .../state/{key}: put state
        form = await _form(request)
        doc = _config_doc(form, "state", True)
        await _call(worker.state_put(tenant, namespace, name, action, doc))
        return Response(status_code=204)
    if action not in ("start", "stop", "restart") or not instance.isdigit():
        raise WebError(404, f"unknown action {action!r}")
    await _call(worker.set_running(tenant, namespace, name, int(instance), action))
    return Response(status_code=204)


@router.get(ONE + "/state/{key}")
async def state_get(request: Request, family: str, tenant: str, namespace: str, name: str, key: str) -> Any:
    return await _call((await _worker(request, family)).state_get(tenant, namespace, name, key))


@router.post(ONE + "/state/{key}/incr")
async def state_incr(request: Request, family: str, tenant: str, namespace: str, name: str, key: str) -> Any:
    try:
        amount = int(json.loads(await request.body())["amount"])
    except (ValueError, KeyError, TypeError):
        raise WebError(400, 'body must be {"amount": <integer>}')
    value = await _call((await _worker(request, family)).state_incr(tenant, namespace, name, key, amount))
    return {"key": key, "numberValue": value}


@router.delete(ONE + "/state/{key}", status_code=204)
async def state_delete(
    request: Request, family: str, tenant: str, namespace: str, name: str, key: str
) -> Response:
    await _call((await _worker(request, family)).state_delete(tenant, namespace, name, key))
    return Response(status_code=204)


@router.get(ONE + "/download")
async def download(request: Request, family: str, tenant: str, namespace: str, name: str) -> Response:
    filename, data = await _call((await _worker(request, family)).code(tenant, namespace, name))
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get("/admin/v2/worker/cluster")
async def worker_cluster(request: Request) -> Any:
    return await _call((await _worker(request, "functions")).cluster())


@router.get("/admin/v2/worker/cluster/leader")
async def worker_leader(request: Request) -> Any:
    return await _call((await _worker(request, "functions")).leader())


@router.get("/admin/v3/{family}/builtin{what}")
async def builtins(request: Request, family: str, what: str) -> Any:
    from magnetar.connectors import catalogue

    kind = {"sources": "source", "sinks": "sink"}.get(family)
    if kind is None or what not in ("sources", "sinks"):
        raise WebError(404, "no such catalogue")
    return JSONResponse([c for c in catalogue() if kind in c.get("kinds", [])])


class _Started:
    """The handle ``_worker`` awaits, for a worker already started (a worker process of its own)."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    async def get(self) -> Any:
        return self.worker


def create_worker_app(worker: Any, auth_services: Any = None) -> Any:
    """The REST API of a worker process of its own (``magnetar functions-worker``): these routes only.

    ``auth_services`` (``.authentication``, ``.authorization``, as the broker service has
    them) turns on the same authentication and per-route authorization as the broker's."""
    from fastapi import FastAPI

    from magnetar.web.auth import install_auth
    from magnetar.web.errors import install_error_handlers

    app = FastAPI(title="magnetar functions worker", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.functions_worker = _Started(worker)
    install_error_handlers(app)
    if auth_services is not None:
        app.state.broker_service = auth_services
        install_auth(app)
    app.include_router(router)
    return app
