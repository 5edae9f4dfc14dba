"""The proxy's HTTP side: admin and HTTP lookup forwarded to a broker's web service.

Theory of operation: Pulsar's proxy forwards ``/admin/*`` (v1, v2, v3) and
``/lookup/*`` to a broker, so ``pulsar-admin --admin-url <proxy>`` works
against the whole cluster.  Each request is sent, with its method, path,
query, body and headers (minus hop-by-hop ones and ``Host``), to the web URL
of a broker chosen by discovery (round-robin); the broker's status, headers
and body come back unchanged.  A broker's 307 (the topic lives elsewhere) is
followed here, so the client never needs to reach a broker directly.  The
client's ``Authorization`` header goes along: the broker authenticates and
authorizes the caller itself.  With ``authenticationEnabled`` the proxy
first checks the credential too (401 before anything is forwarded).  A
broker that cannot be reached is tried once more on the next broker, then
the answer is 503 with the reason.  ``/status.html`` answers ``OK`` (Pulsar's
liveness page), ``/proxy-stats`` the proxy's counters as JSON and
``/metrics`` Pulsar's ``pulsar_proxy_*`` metrics.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from magnetar.proxy.discovery import NoBrokerAvailable

if TYPE_CHECKING:
    from magnetar.proxy.server import ProxyContext

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
     "transfer-encoding", "upgrade", "host", "content-length"}
)  # fmt: skip
METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"]
FORWARD_TIMEOUT_S = 60.0
MAX_BODY_BYTES = 64 * 1024 * 1024


def create_proxy_app(ctx: ProxyContext, client: httpx.AsyncClient) -> Starlette:
    """The app; ``client`` (owned by the caller, who closes it) reaches the brokers."""

    async def forward(request: Request) -> Response:
        authn = ctx.authentication
        if authn is not None and authn.enabled:
            try:
                await authn.authenticate_http(request.headers)
            except Exception as exc:
                return PlainTextResponse(getattr(exc, "message", None) or str(exc), status_code=401)
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return PlainTextResponse("request body too large", status_code=413)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        error = "no broker"
        for _ in range(2):
            try:
                base = await ctx.discovery.next_web_url()
            except NoBrokerAvailable as exc:
                return PlainTextResponse(str(exc), status_code=503)
            url = base.rstrip("/") + request.url.path
            try:
                reply = await client.request(
                    request.method,
                    url,
                    params=request.query_params.multi_items(),
                    content=body,
                    headers=headers,
                )
            except httpx.HTTPError as exc:
                error = f"broker {base} unreachable: {exc}"
                log.info("proxy: %s", error)
                continue
            ctx.stats["http_forwarded"] += 1
            out = {
                k: v for k, v in reply.headers.items() if k.lower() not in HOP_BY_HOP | {"content-encoding"}
            }
            return Response(reply.content, status_code=reply.status_code, headers=out)
        return PlainTextResponse(error, status_code=503)

    async def status(_request: Request) -> Response:
        return PlainTextResponse("OK")

    async def stats(_request: Request) -> Response:
        return JSONResponse(dict(ctx.stats))

    async def metrics(_request: Request) -> Response:
        return PlainTextResponse(proxy_metrics_text(ctx), media_type="text/plain; version=0.0.4")

    app = Starlette(
        routes=[
            Route("/status.html", status, methods=["GET", "HEAD"]),
            Route("/proxy-stats", stats, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/admin/{path:path}", forward, methods=METHODS),
            Route("/lookup/{path:path}", forward, methods=METHODS),
        ],
    )
    return app


def proxy_metrics_text(ctx: ProxyContext) -> str:
    """Pulsar's proxy metrics in the Prometheus text format (names from Pulsar's proxy)."""
    st = ctx.stats
    cluster = ctx.config.cluster_name or "standalone"
    rows = [
        ("pulsar_proxy_active_connections", "gauge", "connections open now", st["active_connections"]),
        ("pulsar_proxy_new_connections", "counter", "connections accepted", st["connections"]),
        ("pulsar_proxy_rejected_connections", "counter", "connections refused (limit)", st["connections_refused"]),
        ("pulsar_proxy_binary_ops", "counter", "lookup-connection requests answered", st["lookups"] + st["relayed"]),
        ("pulsar_proxy_binary_bytes", "counter", "bytes copied through tunnels",
         st["bytes_to_brokers"] + st["bytes_to_clients"]),
    ]  # fmt: skip
    out = []
    for name, kind, help_text, value in rows:
        out += [
            f"# HELP {name} {help_text}",
            f"# TYPE {name} {kind}",
            f'{name}{{cluster="{cluster}"}} {value}',
        ]
    return "\n".join(out) + "\n"
