"""HTTP authentication and per-route authorization over the real route list (web/auth.py).

Table-driven: every route of ``create_app`` must have a rule in ``web.auth.RULES``
(a route without one is denied by default and listed here), and each route is
called as nobody (401), as the admin of *another* tenant (403 unless any
authenticated role may), as the tenant's own admin (allowed unless the route is
super-user only) and as a super-user (allowed).  "Allowed" means the request
got past the middleware: the fake service behind it answers whatever it
answers, but never 401/403.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from types import SimpleNamespace

import httpx
import jwt
import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocket

from magnetar.broker.auth import AuthConfig, AuthenticationService, AuthorizationService
from magnetar.broker.auth.basic import apr1_md5
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock
from magnetar.web.app import create_app
from magnetar.web.auth import PUBLIC, RuleKind, route_table, rule_for

SECRET = b"0123456789abcdef0123456789abcdef"
SUPER, ADMIN1, ADMIN2, CONSUMER = "root", "admin-t1", "admin-t2", "reader"

# Path segments that name an *operation*, not a policy: a route ending in one of these must
# have an explicit rule, not the "policy" shape rule (which would make it tenant-admin only).
OPERATION_WORDS = {
    "terminate", "unload", "compaction", "offload", "stats", "subscriptions", "lastMessageId",
    "examinemessage", "clearBacklog", "unsubscribe", "permissions", "bundles", "topics",
    "partitions", "createMissedPartitions", "skip_all", "resetcursor", "expireMessages",
    "internalStats", "partitioned-stats", "backlogSize", "truncate", "trim", "split",
    "messageById", "subscribe", "lookup",
}  # fmt: skip


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(role)}"}


@pytest.fixture
async def secured_app(tmp_path):
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(f"{ADMIN1}:{apr1_md5(b'pw1', b'salt1234')}\n")
    cfg = AuthConfig.from_properties(
        {
            "authenticationEnabled": "true",
            "authenticationProviders": "token,basic",
            "tokenSecretKey": f"file://{key}",
            "basicAuthConf": str(htpasswd),
            "authorizationEnabled": "true",
            "superUserRoles": SUPER,
        }
    )
    store = MemoryMetadataServer().session()
    for tenant, admin in (("t1", ADMIN1), ("t2", ADMIN2)):
        await store.put(f"/admin/policies/{tenant}", json.dumps({"adminRoles": [admin]}).encode(), None)
    grants = {"auth_policies": {"namespace_auth": {CONSUMER: ["consume"]}}}
    await store.put("/admin/policies/t1/ns", json.dumps(grants).encode(), None)
    await store.put("/admin/policies/t2/ns", json.dumps({}).encode(), None)  # exists, no grants
    authn = AuthenticationService.from_config(cfg, RealClock())
    svc = SimpleNamespace(authentication=authn, authorization=AuthorizationService(cfg, store))
    app = create_app(svc)
    yield app
    await authn.aclose()


def concrete(template: str, tenant: str = "t1") -> str:
    values = {"domain": "persistent", "tenant": tenant, "namespace": "ns", "topic": "tp"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "1"), template)


async def call(app, method: str, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        return await c.request(method, path, headers=headers or {})


def test_every_route_has_an_authorization_rule() -> None:
    app = create_app(SimpleNamespace())
    table = route_table(app)
    assert len(table) > 50
    missing = [f"{m} {p}" for m, p, r in table if r is None]
    assert not missing, "routes without an authorization rule (add them to web.auth.RULES):\n" + "\n".join(
        missing
    )


def test_operation_routes_are_not_classified_as_policies() -> None:
    app = create_app(SimpleNamespace())
    suspicious = [
        f"{m} {p}"
        for m, p, r in route_table(app)
        if r is not None and r.kind is RuleKind.POLICY and p.rsplit("/", 1)[-1] in OPERATION_WORDS
    ]
    assert not suspicious, "operation routes that fell into the policy rule:\n" + "\n".join(suspicious)


def test_unknown_route_shapes_have_no_rule() -> None:
    assert rule_for("GET", "/admin/v2/newthing/{tenant}/{x}") is None
    assert (
        rule_for("POST", "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}/new")
        is None
    )
    assert rule_for("GET", "/metrics") is PUBLIC


async def test_table_driven_roles_over_every_route(secured_app) -> None:
    failures: list[str] = []
    checked = 0
    for method, template, rule in route_table(secured_app):
        assert rule is not None
        if rule is PUBLIC or method == "WEBSOCKET":
            continue  # WebSocket routes: test_websocket_routes_... here, tests/compat/test_ws_security.py
        path = concrete(template)
        expect_admin_ok = rule.kind is not RuleKind.SUPERUSER
        expect_other_ok = rule.kind is RuleKind.AUTHENTICATED
        cases = (
            ("nobody", {}, {401}),
            ("other-tenant-admin", bearer(ADMIN2), None if expect_other_ok else {403}),
            ("tenant-admin", bearer(ADMIN1), None if expect_admin_ok else {403}),
            ("super-user", bearer(SUPER), None),
        )
        for who, headers, expected in cases:
            r = await call(secured_app, method, path, headers)
            ok = r.status_code in expected if expected else r.status_code not in (401, 403)
            if not ok:
                failures.append(f"{who}: {method} {path} [{rule}] -> {r.status_code} {r.text[:120]}")
            elif r.status_code in (401, 403):
                assert r.json()["reason"], r.text
        checked += 1
    assert checked > 50
    assert not failures, "\n".join(failures[:40])


async def test_no_credentials_is_401_with_a_reason(secured_app) -> None:
    r = await call(secured_app, "GET", "/admin/v2/tenants")
    assert r.status_code == 401
    assert "anonymous" in r.json()["reason"] or "authenticat" in r.json()["reason"].lower()


async def test_public_routes_need_no_credentials(secured_app) -> None:
    assert (await call(secured_app, "GET", "/metrics")).status_code == 200


async def test_basic_credentials_over_http(secured_app) -> None:
    good = base64.b64encode(f"{ADMIN1}:pw1".encode()).decode()
    bad = base64.b64encode(f"{ADMIN1}:nope".encode()).decode()
    r = await call(secured_app, "GET", "/admin/v2/tenants/t1", {"Authorization": f"Basic {good}"})
    assert r.status_code not in (401, 403), r.text
    r = await call(secured_app, "GET", "/admin/v2/tenants/t1", {"Authorization": f"Basic {bad}"})
    assert r.status_code == 401 and r.json()["reason"]
    r = await call(secured_app, "GET", "/admin/v2/tenants/t1", {"Authorization": "Basic %%%"})
    assert r.status_code == 401 and "base64" in r.json()["reason"]


async def test_lookup_needs_produce_or_consume(secured_app) -> None:
    path = "/lookup/v2/topic/persistent/t1/ns/tp"
    r = await call(secured_app, "GET", path, bearer(CONSUMER))
    assert r.status_code not in (401, 403), r.text
    r = await call(secured_app, "GET", "/lookup/v2/topic/persistent/t2/ns/tp", bearer(CONSUMER))
    assert r.status_code == 403
    assert CONSUMER in r.json()["reason"]
    # a namespace that does not exist is not found, for any role (Pulsar's answer)
    r = await call(secured_app, "GET", "/lookup/v2/topic/persistent/t2/missing/tp", bearer(CONSUMER))
    assert r.status_code == 404, r.text


@pytest.mark.parametrize(
    "value",
    [
        "Bearer not-a-jwt",
        "Bearer " + jwt.encode({"sub": SUPER}, b"another-secret-another-secret-32", "HS256"),
        "Bearer " + jwt.encode({"sub": SUPER, "exp": 1}, SECRET, "HS256"),
        "Bearer " + "a" * 20000,
        "Weird scheme",
    ],
    ids=["malformed", "wrong-signature", "expired", "oversized", "unknown-scheme"],
)
async def test_bad_credentials_are_401_and_the_app_keeps_serving(secured_app, value) -> None:
    r = await call(secured_app, "GET", "/admin/v2/tenants", {"Authorization": value})
    assert r.status_code == 401
    assert r.json()["reason"]
    assert "a" * 100 not in r.json()["reason"]  # the credential is not echoed
    r = await call(secured_app, "GET", "/admin/v2/tenants", bearer(SUPER))
    assert r.status_code not in (401, 403)


async def test_unknown_paths_fail_closed(secured_app) -> None:
    assert (await call(secured_app, "GET", "/admin/v2/no-such-thing/x")).status_code == 401
    r = await call(secured_app, "GET", "/admin/v2/no-such-thing/x", bearer(SUPER))
    assert r.status_code == 404 and r.json()["reason"]


def test_websocket_routes_are_authenticated_and_authorized(tmp_path) -> None:
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    cfg = AuthConfig.from_properties(
        {
            "authenticationEnabled": "true",
            "authenticationProviders": "token",
            "tokenSecretKey": f"file://{key}",
            "authorizationEnabled": "true",
            "superUserRoles": SUPER,
        }
    )
    store = MemoryMetadataServer().session()
    asyncio.run(store.put("/admin/policies/t1/ns", b"{}", None))  # exists, no grants: refusals are 403
    svc = SimpleNamespace(
        authentication=AuthenticationService.from_config(cfg, RealClock()),
        authorization=AuthorizationService(cfg, store),
    )
    app = create_app(svc)

    @app.websocket("/ws/v2/producer/{domain}/{tenant}/{namespace}/{topic}")
    async def ws_producer(websocket: WebSocket, domain: str, tenant: str, namespace: str, topic: str) -> None:
        await websocket.accept()
        await websocket.send_text("welcome")
        await websocket.close()

    app.router.routes.insert(0, app.router.routes.pop())  # ahead of the real (broker-driven) route
    ws_rules = [(m, p, r) for m, p, r in route_table(app) if p.startswith("/ws/v2/") and "pingpong" not in p]
    assert ws_rules and all(r is not None and r.kind is RuleKind.TOPIC_OP for _, _, r in ws_rules)
    path = "/ws/v2/producer/persistent/t1/ns/tp"
    with TestClient(app) as tc:
        with tc.websocket_connect(path, headers=bearer(SUPER)) as ws:
            assert ws.receive_text() == "welcome"
        # Refused before the upgrade with an HTTP status, as Pulsar's WebSocket service does.
        for headers, status in (({}, 401), (bearer("nobody"), 403), ({}, 401)):
            with pytest.raises(WebSocketDenialResponse) as err, tc.websocket_connect(path, headers=headers):
                pass
            assert err.value.status_code == status and err.value.json()["reason"]
        # A namespace that does not exist is not found, for any role (Pulsar's answer, as for lookups).
        missing = "/ws/v2/producer/persistent/t1/missing/tp"
        with (
            pytest.raises(WebSocketDenialResponse) as err,
            tc.websocket_connect(missing, headers=bearer("nobody")),
        ):
            pass
        assert err.value.status_code == 404
    asyncio.run(svc.authentication.aclose())


async def test_metrics_authenticated_when_configured(secured_app) -> None:
    secured_app.state.broker_service.config = SimpleNamespace(
        as_properties=lambda: {"authenticateMetricsEndpoint": "true"}
    )
    assert (await call(secured_app, "GET", "/metrics")).status_code == 401
    assert (await call(secured_app, "GET", "/metrics", bearer(ADMIN2))).status_code == 200
