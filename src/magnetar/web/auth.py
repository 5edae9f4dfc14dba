"""HTTP authentication and per-route authorization for the broker's web service.

Theory of operation: one pure-ASGI middleware (:func:`install_auth`) stands in
front of every route.  For each request it

1. finds the route the router would pick (the same ``route.matches`` test, in
   the same order) and so its *path template* and path parameters;
2. looks up the route's :class:`Rule` in :data:`RULES` by (method, template);
   the table is an ordered list of (methods, template regex, rule) and the
   first match wins;
3. when ``authenticationEnabled``: authenticates the request through the
   broker's ``AuthenticationService.authenticate_http`` (``Authorization:
   Bearer <jwt>`` / ``Basic <b64>``, or the client certificate's CN on HTTPS);
   failure -> 401 ``{"reason": ...}``;
4. when ``authorizationEnabled``: applies the rule with
   ``OperationAuthorizer`` / ``AuthorizationService``; refusal -> 403
   ``{"reason": ...}``.  A route without a rule is *denied* (default-deny) and
   ``tests/unit/web/test_auth_routes.py`` lists such routes so they are
   caught when added.  A request no route claims is answered 404 here
   (fail closed) once authenticated.

The check runs before the handler, so a refused request never changes
anything.  The authenticated role is left in ``scope["state"]["auth_role"]``.

Rules, as Pulsar's default authorization provider has them:

* PUBLIC -- ``/metrics`` (authenticated when ``authenticateMetricsEndpoint``
  is true; Pulsar's default is false) and ``/openapi.json`` (the API description);
* AUTHENTICATED -- any authenticated role: broker ready/version, cluster reads;
* SUPERUSER -- cluster/broker administration (every other ``clusters``,
  ``brokers``, ``broker-stats``, ``bookies``, ``resource-quotas``,
  ``resourcegroups`` route), the tenant list, tenant create/update/delete,
  namespace and bundle unload;
* TENANT_ADMIN -- reading a tenant; TENANT_OP -- namespace list/create/delete;
* NAMESPACE_OP / TOPIC_OP -- Pulsar's Namespace/TopicOperation (lookup, stats,
  subscriptions, skip, expire, reset, peek -> produce/consume grants;
  permissions, terminate, unload, partitions -> tenant admin);
* POLICY -- every namespace or topic policy read or write (a path
  ``.../{namespace}/<policy>`` or ``.../{topic}/<policy>`` with literal
  segments): tenant admin.  This family is matched by shape, as Pulsar treats
  every policy the same way; any other new route shape has no rule.

TLS client certificates: ASGI does not carry the peer certificate, so the
HTTPS server (``magnetar.app.tls``) records it per client address and the
composition root sets ``app.state.tls_peer_lookup(client) -> cert | None``.
"""

from __future__ import annotations

import enum
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from magnetar.broker.auth import (
    AuthenticationError,
    AuthorizationError,
    NamespaceOperation,
    OperationAuthorizer,
    PolicyOperation,
    TenantOperation,
    TopicOperation,
)
from magnetar.broker.errors import BrokerError
from magnetar.web.errors import reason
from magnetar.web.lazy_routers import load_all

log = logging.getLogger(__name__)


class RuleKind(enum.Enum):
    PUBLIC = "public"
    AUTHENTICATED = "authenticated"
    SUPERUSER = "superuser"
    TENANT_ADMIN = "tenant-admin"
    TENANT_OP = "tenant-operation"
    NAMESPACE_OP = "namespace-operation"
    TOPIC_OP = "topic-operation"
    POLICY = "policy"


@dataclass(frozen=True)
class Rule:
    kind: RuleKind
    operation: enum.Enum | None = None

    def __str__(self) -> str:
        return self.kind.value + (f":{self.operation.value}" if self.operation is not None else "")


PUBLIC = Rule(RuleKind.PUBLIC)
AUTHENTICATED = Rule(RuleKind.AUTHENTICATED)
SUPERUSER = Rule(RuleKind.SUPERUSER)
TENANT_ADMIN = Rule(RuleKind.TENANT_ADMIN)


def _tenant(op: TenantOperation) -> Rule:
    return Rule(RuleKind.TENANT_OP, op)


def _ns(op: NamespaceOperation) -> Rule:
    return Rule(RuleKind.NAMESPACE_OP, op)


def _topic(op: TopicOperation) -> Rule:
    return Rule(RuleKind.TOPIC_OP, op)


POLICY = Rule(RuleKind.POLICY)  # READ for GET, WRITE otherwise (decided per method)

_NS = r"/admin/v2/namespaces/\{tenant\}/\{namespace\}"
_TP = r"/admin/v2/\{domain\}/\{tenant\}/\{namespace\}/\{topic\}"
_SUB = _TP + r"/subscription/\{subscription\}"
_LIT = r"[A-Za-z][A-Za-z0-9_-]*"  # a literal path segment (no parameter)
_PARAM = r"\{[A-Za-z_]+\}"
_ANY = None  # every method
WEBSOCKET = "WEBSOCKET"  # the pseudo-method of a WebSocket route
MAX_CACHED_PATHS = 4096  # request paths whose route match is remembered (LRU)

_N, _T, _TO = NamespaceOperation, TopicOperation, TenantOperation

# (methods or None for all, full-match regex over the route's path template, rule); first match wins.
RULES: tuple[tuple[frozenset[str] | None, re.Pattern[str], Rule], ...] = tuple(
    (frozenset(m.split()) if m else None, re.compile(p), r)
    for m, p, r in (
        # ---- public
        ("GET", r"/metrics/?", PUBLIC),
        ("GET", r"/openapi\.json", PUBLIC),
        ("GET", r"/console(/.*)?", PUBLIC),  # the web console's page and assets: no data (web/console/)
        ("POST", r"/console/api/decode", AUTHENTICATED),  # decodes what the caller sends; reads nothing
        # ---- lookup
        ("GET", r"/lookup/v2/topic/\{domain\}/\{tenant\}/\{namespace\}/\{topic\}(/bundle)?", _topic(_T.LOOKUP)),
        # ---- brokers, clusters and other cluster-wide administration: super-user
        ("GET", r"/admin/v2/brokers/(ready|version)", AUTHENTICATED),
        ("GET", r"/admin/v2/clusters(/\{cluster\})?", AUTHENTICATED),
        (_ANY, r"/admin/v2/(clusters|brokers|broker-stats|bookies|resource-quotas|resourcegroups)(/.*)?", SUPERUSER),
        # ---- tenants
        ("GET", r"/admin/v2/tenants", SUPERUSER),
        ("GET", r"/admin/v2/tenants/\{tenant\}", TENANT_ADMIN),
        ("PUT POST DELETE", r"/admin/v2/tenants/\{tenant\}", SUPERUSER),
        # ---- namespaces
        ("GET", r"/admin/v2/namespaces/\{tenant\}", _tenant(_TO.LIST_NAMESPACES)),
        ("PUT", _NS, _tenant(_TO.CREATE_NAMESPACE)),
        ("DELETE", _NS, _tenant(_TO.DELETE_NAMESPACE)),
        ("GET", _NS, POLICY),
        ("GET", _NS + r"/topics", _ns(_N.GET_TOPICS)),
        ("GET", _NS + r"/bundles", _ns(_N.GET_BUNDLE)),
        ("PUT", _NS + r"(/\{bundle\})?/unload", SUPERUSER),
        ("PUT", _NS + r"/\{bundle\}/split", SUPERUSER),
        ("DELETE", _NS + r"/\{bundle\}", _ns(_N.DELETE_BUNDLE)),
        ("POST", _NS + r"(/\{bundle\})?/clearBacklog(/\{subscription\})?", _ns(_N.CLEAR_BACKLOG)),
        ("POST", _NS + r"(/\{bundle\})?/unsubscribe/\{subscription\}", _ns(_N.UNSUBSCRIBE)),
        ("GET", _NS + r"/permissions(/subscription)?", _ns(_N.GET_PERMISSION)),
        ("POST", _NS + r"/permissions/(subscription/\{subscription\}|\{role\})", _ns(_N.GRANT_PERMISSION)),
        ("DELETE", _NS + r"/permissions/(\{subscription\}/)?\{role\}", _ns(_N.REVOKE_PERMISSION)),
        (_ANY, _NS + r"/(property|resourcegroup)(/" + _PARAM + r")*", POLICY),
        (_ANY, _NS + rf"/{_LIT}(/{_LIT})?", POLICY),
        # ---- schemas
        ("GET", r"/admin/v2/schemas/\{tenant\}/\{namespace\}/\{topic\}/schemas?(/\{version\})?", _topic(_T.LOOKUP)),
        (_ANY, r"/admin/v2/schemas/\{tenant\}/\{namespace\}/\{topic\}/.*", _topic(_T.UPDATE_METADATA)),
        # ---- topics of a namespace
        ("GET", r"/admin/v2/\{domain\}/\{tenant\}/\{namespace\}(/partitioned)?", _ns(_N.GET_TOPICS)),
        ("PUT", _TP + r"(/partitions)?", _ns(_N.CREATE_TOPIC)),
        ("DELETE", _TP + r"(/partitions)?", _ns(_N.DELETE_TOPIC)),
        # ---- topic operations
        ("GET", _TP + r"/partitions", _topic(_T.GET_METADATA)),
        ("POST", _TP + r"/(partitions|createMissedPartitions)", _topic(_T.UPDATE_METADATA)),
        ("PUT", _TP + r"/unload", _topic(_T.UNLOAD)),
        ("GET", _TP + r"/(stats|partitioned-stats|internalStats|partitioned-internalStats)", _topic(_T.GET_STATS)),
        ("GET", _TP + r"/subscriptions", _topic(_T.GET_SUBSCRIPTIONS)),
        ("PUT", _SUB, _topic(_T.SUBSCRIBE)),
        ("DELETE", _SUB, _topic(_T.UNSUBSCRIBE)),
        ("POST", _SUB + r"/(skip_all|skip/\{numMessages\})", _topic(_T.SKIP)),
        ("POST", _SUB + r"/expireMessages(/\{expireTimeInSeconds\})?", _topic(_T.EXPIRE_MESSAGES)),
        ("POST", _TP + r"/all_subscription/expireMessages/\{expireTimeInSeconds\}", _topic(_T.EXPIRE_MESSAGES)),
        ("POST", _SUB + r"/resetcursor(/\{timestamp\})?", _topic(_T.RESET_CURSOR)),
        ("GET", _SUB + r"/position/\{messagePosition\}", _topic(_T.PEEK_MESSAGES)),
        ("GET", _TP + r"/(examinemessage|lastMessageId|ledger/\{ledgerId\}/entry/\{entryId\})", _topic(_T.PEEK_MESSAGES)),
        ("POST", _TP + r"/terminate(/partitions)?", _topic(_T.TERMINATE)),
        ("PUT GET", _TP + r"/compaction", _topic(_T.COMPACT)),
        ("PUT GET", _TP + r"/offload", _topic(_T.OFFLOAD)),
        ("GET", _TP + r"/permissions", _topic(_T.GET_PERMISSION)),
        ("POST", _TP + r"/permissions/\{role\}", _topic(_T.GRANT_PERMISSION)),
        ("DELETE", _TP + r"/permissions/\{role\}", _topic(_T.REVOKE_PERMISSION)),
        # ---- transactions (web/transactions.py): superusers, as Pulsar's Transactions resource
        (_ANY, r"/admin/v3/transactions/.*", SUPERUSER),
        # ---- Pulsar Functions / IO (web/functions.py): the namespace's tenant admins, as allowFunctionOps
        ("GET", r"/admin/v3/\{family\}/builtin\{what\}", AUTHENTICATED),
        ("GET", r"/admin/v2/worker/cluster(/leader)?", SUPERUSER),  # the workers and their leader
        (_ANY, r"/admin/v3/\{family\}/\{tenant\}/\{namespace\}(/.*)?", TENANT_ADMIN),
        # ---- WebSocket API (Pulsar's /ws/v2 paths)
        (WEBSOCKET, r"/ws(/v2)?/pingpong", AUTHENTICATED),
        (WEBSOCKET, r"/ws/v3/consumer/\{subscription\}", AUTHENTICATED),  # per-topic check in the session
        (WEBSOCKET, r"/ws/v2/producer/\{domain\}/\{tenant\}/\{namespace\}/\{topic\}", _topic(_T.PRODUCE)),
        (WEBSOCKET, r"/ws/v2/(consumer|reader)/\{domain\}/\{tenant\}/\{namespace\}/\{topic\}(/\{subscription\})?", _topic(_T.CONSUME)),
        # ---- topic policies (one literal segment after the topic)
        (_ANY, _TP + rf"/{_LIT}", POLICY),
    )
)  # fmt: skip


def rule_for(method: str, template: str) -> Rule | None:
    """The rule of a route (None: no rule -> denied when authorization is on)."""
    method = "GET" if method == "HEAD" else method
    for methods, pattern, rule in RULES:
        if (methods is None or method in methods) and pattern.fullmatch(template):
            return rule
    return None


def iter_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every leaf route in routing order (FastAPI may nest included routers)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from iter_routes(inner.routes)
        else:
            yield route


def route_methods(route: BaseRoute) -> frozenset[str]:
    return frozenset(getattr(route, "methods", None) or ())


def route_table(app: FastAPI) -> list[tuple[str, str, Rule | None]]:
    """(method, template, rule) for every route of the app; the test walks this."""
    load_all(app)  # the admin routers are built on first use (web.lazy_routers)
    out = []
    for route in iter_routes(app.routes):
        template = getattr(route, "path", "")
        methods = route_methods(route) - {"HEAD"}
        if not methods and "websocket" in type(route).__name__.lower():
            methods = frozenset({WEBSOCKET})
        for method in sorted(methods):
            out.append((method, template, rule_for(method, template)))
    return out


class _Denied(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class AuthMiddleware:
    """Pure ASGI: authenticate, then authorize by the route's rule, then call the app."""

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self._routes: list[BaseRoute] | None = None
        self._routes_count = 0
        self._rules: dict[tuple[str, str], Rule | None] = {}
        # (scope type, method, path) -> the route found, least recently used first
        self._matches: OrderedDict[tuple[str, str, str], tuple[tuple[str, dict[str, Any]] | None]] = (
            OrderedDict()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        svc = getattr(self.fastapi_app.state, "broker_service", None)
        authn = getattr(svc, "authentication", None)
        authz = getattr(svc, "authorization", None)
        if authn is None or authz is None or not (authn.enabled or authz.enabled):
            await self.app(scope, receive, send)
            return
        try:
            role = await self._check(scope, authn, authz)
        except _Denied as exc:
            if scope["type"] == "websocket":  # refused before accept: an HTTP status, as Pulsar's
                await _deny_websocket(scope, send, exc)
            else:
                await reason(exc.status, exc.message)(scope, receive, send)
            return
        scope.setdefault("state", {})["auth_role"] = role
        await self.app(scope, receive, send)

    def _rule(self, method: str, template: str) -> Rule | None:
        key = (method, template)
        if key not in self._rules:  # bounded by the number of (method, route) pairs
            self._rules[key] = rule_for(method, template)
        return self._rules[key]

    def _match(self, scope: Scope) -> tuple[str, dict[str, Any]] | None:
        if self._routes is None or self._routes_count != len(self.fastapi_app.routes):
            # First use, or routes were added since (web.lazy_routers): walk them again.
            self._routes_count = len(self.fastapi_app.routes)
            self._routes = list(iter_routes(self.fastapi_app.routes))
            self._matches.clear()
        key = (scope["type"], scope.get("method", WEBSOCKET), scope.get("path", ""))
        cached = self._matches.get(key)
        if cached is not None:
            self._matches.move_to_end(key)
            return cached[0]
        found: tuple[str, dict[str, Any]] | None = None
        for route in self._routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                found = getattr(route, "path", ""), dict(child.get("path_params") or {})
                break
        self._matches[key] = (found,)
        if len(self._matches) > MAX_CACHED_PATHS:
            self._matches.popitem(last=False)
        return found

    async def _check(self, scope: Scope, authn: Any, authz: Any) -> str | None:
        found = self._match(scope)
        method = scope.get("method", WEBSOCKET)
        rule = self._rule(method, found[0]) if found is not None else None
        if (
            rule is None
            and found is not None
            and found[0] in getattr(self.fastapi_app.state, "servlet_paths", ())
        ):
            rule = AUTHENTICATED  # an additional servlet (web.plugins): any authenticated role
        if rule is PUBLIC and found is not None and found[0].startswith("/metrics"):
            if _metrics_authenticated(self.fastapi_app):
                rule = AUTHENTICATED  # authenticateMetricsEndpoint=true
        if rule is PUBLIC:
            return None
        role: str | None = None
        if authn.enabled:
            role = await self._authenticate(scope, authn)
        if not authz.enabled:
            return role
        if found is None:  # fail closed: a request no route claims gets nothing past this point
            raise _Denied(404, f"no such resource: {method} {scope.get('path', '')[:200]}")
        template, params = found
        if rule is None:
            raise _Denied(403, f"no authorization rule for {method} {template}; denied by default")
        try:
            await _apply(rule, method, role, params, authz)
        except AuthorizationError as exc:
            ns = f"{params.get('tenant', '')}/{params.get('namespace', '')}"
            if rule.kind is RuleKind.TOPIC_OP and not await authz.namespace_exists(ns):
                # Pulsar: a topic in a namespace that does not exist is not found, for any role.
                raise _Denied(404, "Namespace does not exist") from None
            raise _Denied(403, exc.message) from None
        except ValueError as exc:  # an unparsable topic or namespace name
            raise _Denied(400, f"invalid name: {exc}") from None
        return role

    async def _authenticate(self, scope: Scope, authn: Any) -> str | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        if scope["type"] == "websocket" and not any(k.lower() == "authorization" for k in headers):
            token = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            if token:  # Pulsar's WebSocket API: ?token=<jwt> for browsers that cannot set headers
                headers["authorization"] = f"Bearer {token[0]}"
        peer = None
        lookup: Callable[[Any], Any] | None = getattr(self.fastapi_app.state, "tls_peer_lookup", None)
        if lookup is not None and scope.get("client"):
            server = scope.get("server")
            peer = lookup(tuple(scope["client"]), tuple(server) if server else None)
        try:
            result = await authn.authenticate_http(headers, peer)
        except AuthenticationError as exc:
            raise _Denied(401, exc.message) from None
        except BrokerError as exc:  # TooManyRequests while bcrypt is saturated
            raise _Denied(exc.http_status, exc.message) from None
        return result.role


async def _apply(rule: Rule, method: str, role: str | None, p: dict[str, Any], authz: Any) -> None:
    ops = OperationAuthorizer(authz)
    kind = rule.kind
    if kind is RuleKind.AUTHENTICATED:
        if role is None:
            raise AuthorizationError("this operation needs an authenticated role")
        return
    if kind is RuleKind.SUPERUSER:
        authz.check_superuser(role)
        return
    tenant = str(p.get("tenant", ""))
    if kind is RuleKind.TENANT_ADMIN:
        await authz.check_tenant_admin(role, tenant)
    elif kind is RuleKind.TENANT_OP:
        assert isinstance(rule.operation, TenantOperation)
        await ops.check_tenant_operation(role, tenant, rule.operation)
    elif kind is RuleKind.POLICY:
        op = PolicyOperation.READ if method in ("GET", "HEAD") else PolicyOperation.WRITE
        await ops.check_policy_operation(role, tenant, op)
    elif kind is RuleKind.NAMESPACE_OP:
        assert isinstance(rule.operation, NamespaceOperation)
        await ops.check_namespace_operation(role, f"{tenant}/{p.get('namespace', '')}", rule.operation)
    elif kind is RuleKind.TOPIC_OP:
        assert isinstance(rule.operation, TopicOperation)
        domain = str(p.get("domain", "persistent"))
        if domain not in ("persistent", "non-persistent"):
            raise ValueError(f"unknown topic domain {domain!r}")
        topic = f"{domain}://{tenant}/{p.get('namespace', '')}/{p.get('topic', '')}"
        await ops.check_topic_operation(role, topic, rule.operation, p.get("subscription"))
    else:  # pragma: no cover - every kind is handled above
        raise AuthorizationError(f"unhandled rule {rule}")


async def _deny_websocket(scope: Scope, send: Send, exc: _Denied) -> None:
    if "websocket.http.response" in (scope.get("extensions") or {}):
        body = json.dumps({"reason": exc.message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": exc.status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": exc.message[:120]})


def _metrics_authenticated(app: FastAPI) -> bool:
    """Pulsar's ``authenticateMetricsEndpoint`` (default false), from the broker's config."""
    broker_service = getattr(app.state, "broker_service", None)
    config = getattr(broker_service, "config", None)
    as_properties = getattr(config, "as_properties", None)
    if as_properties is None:
        return False
    value = as_properties().get("authenticateMetricsEndpoint", False)
    return str(value).strip().lower() == "true"


def install_auth(app: FastAPI) -> None:
    """Install the middleware; it reads the broker service's ``authentication`` and ``authorization``."""
    app.add_middleware(AuthMiddleware, fastapi_app=app)


__all__ = ["AuthMiddleware", "Rule", "RuleKind", "RULES", "install_auth", "route_table", "rule_for"]
