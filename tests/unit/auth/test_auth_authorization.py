"""AuthorizationService decisions, table-driven, over real policies in a memory metadata store."""

from __future__ import annotations

import json

import pytest

from magnetar.broker.auth.authorization import AuthorizationService, role_matches
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthorizationError
from magnetar.broker.auth.permissions import PermissionStore
from magnetar.broker.errors import Code
from magnetar.metadata.memory import MemoryMetadataServer

T1 = "persistent://acme/ns/t1"
T2 = "persistent://acme/ns/t2"
PT = "persistent://acme/ns/pt"
OTHER = "persistent://other/ns/x"


def _policies(mode: str = "None") -> bytes:
    return json.dumps(
        {
            "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
            "replication_clusters": ["standalone"],
            "subscription_auth_mode": mode,
            "message_ttl_in_seconds": 42,
        }
    ).encode()


@pytest.fixture
async def store():  # type: ignore[no-untyped-def]
    s = MemoryMetadataServer().session()
    await s.put(
        "/admin/policies/acme", json.dumps({"adminRoles": ["acme-admin"], "allowedClusters": []}).encode()
    )
    await s.put(
        "/admin/policies/other", json.dumps({"adminRoles": ["other-admin"], "allowedClusters": []}).encode()
    )
    await s.put("/admin/policies/acme/ns", _policies())
    await s.put("/admin/policies/acme/prefixed", _policies("Prefix"))
    await s.put("/admin/policies/other/ns", _policies())
    perms = PermissionStore(s)
    await perms.grant_permission("acme/ns", "ns-producer", ["produce"])
    await perms.grant_permission("acme/ns", "ns-consumer", ["consume"])
    await perms.grant_permission("acme/ns", "both", ["produce", "consume"])
    await perms.grant_permission("acme/ns", "fn", ["functions"])
    await perms.grant_topic_permission(T1, "t1-producer", ["produce"])
    await perms.grant_topic_permission(T1, "t1-consumer", ["consume"])
    await perms.grant_topic_permission(PT, "pt-consumer", ["consume"])
    await perms.grant_subscription_permission("acme/ns", "locked-sub", ["ns-consumer"])
    await perms.grant_permission("acme/prefixed", "pc", ["consume"])
    await perms.grant_permission("acme/ns", "team-*", ["produce"])
    await perms.grant_permission("acme/ns", "*-bot", ["consume"])
    yield s
    await s.aclose()


def service(store, **cfg: object) -> AuthorizationService:  # type: ignore[no-untyped-def]
    base: dict[str, object] = {"authorization_enabled": True, "super_user_roles": frozenset({"super"})}
    base.update(cfg)
    return AuthorizationService(AuthConfig(**base), store)  # type: ignore[arg-type]


# (role, operation, topic, subscription, expected)
DECISIONS = [
    ("super", "produce", T1, None, True),
    ("super", "consume", "persistent://nowhere/ns/t", "s", True),
    ("acme-admin", "produce", T1, None, True),
    ("acme-admin", "consume", T1, "locked-sub", True),
    ("acme-admin", "produce", OTHER, None, False),
    ("other-admin", "consume", T1, "s", False),
    ("ns-producer", "produce", T1, None, True),
    ("ns-producer", "produce", T2, None, True),
    ("ns-producer", "consume", T1, "s", False),
    ("ns-producer", "lookup", T1, None, True),
    ("ns-producer", "produce", OTHER, None, False),
    ("ns-producer", "produce", "persistent://acme/missing/t", None, False),
    ("ns-consumer", "consume", T1, "s", True),
    ("ns-consumer", "consume", T1, "locked-sub", True),
    ("ns-consumer", "produce", T1, None, False),
    ("ns-consumer", "lookup", T1, None, True),
    ("both", "consume", T1, "locked-sub", False),
    ("both", "consume", T1, "free-sub", True),
    ("t1-producer", "produce", T1, None, True),
    ("t1-producer", "produce", T2, None, False),
    ("t1-producer", "consume", T1, "s", False),
    ("t1-consumer", "consume", T1, "s", True),
    ("t1-consumer", "lookup", T2, None, False),
    ("pt-consumer", "consume", PT + "-partition-2", "s", True),
    ("pt-consumer", "consume", PT, "s", True),
    ("pt-consumer", "consume", T1, "s", False),
    ("fn", "produce", T1, None, False),
    ("fn", "lookup", T1, None, False),
    ("nobody", "produce", T1, None, False),
    ("nobody", "consume", T1, "s", False),
    ("nobody", "lookup", T1, None, False),
    (None, "produce", T1, None, False),
    ("pc", "consume", "persistent://acme/prefixed/t", "pc-sub", True),
    ("pc", "consume", "persistent://acme/prefixed/t", "other-sub", False),
    # wildcards are off by default: the literal grants "team-*" / "*-bot" match nobody
    ("team-a", "produce", T1, None, False),
    ("ci-bot", "consume", T1, "s", False),
]


async def _decide(authz: AuthorizationService, role, op, topic, sub, original=None) -> bool:  # type: ignore[no-untyped-def]
    if op == "produce":
        return await authz.can_produce(role, topic, original)
    if op == "consume":
        return await authz.can_consume(role, topic, sub, original)
    return await authz.can_lookup(role, topic, original)


@pytest.mark.parametrize(("role", "op", "topic", "sub", "expected"), DECISIONS)
async def test_decisions(store, role, op, topic, sub, expected) -> None:  # type: ignore[no-untyped-def]
    assert await _decide(service(store), role, op, topic, sub) is expected


@pytest.mark.parametrize(
    ("role", "op", "expected"),
    [
        ("team-a", "produce", True),
        ("teamx", "produce", False),
        ("ci-bot", "consume", True),
        ("ci-bot", "produce", False),
    ],
)
async def test_wildcard_matching_when_enabled(store, role, op, expected) -> None:  # type: ignore[no-untyped-def]
    authz = service(store, authorization_allow_wildcards_matching=True)
    assert await _decide(authz, role, op, T1, "s") is expected


def test_role_matches() -> None:
    assert role_matches("a*", "abc", True) and not role_matches("a*", "abc", False)
    assert role_matches("*c", "abc", True) and not role_matches("*c", "abd", True)
    assert role_matches("x", "x", False) and not role_matches("", "x", True)


async def test_disabled_authorization_allows_everything(store) -> None:  # type: ignore[no-untyped-def]
    authz = service(store, authorization_enabled=False)
    assert await authz.can_produce("nobody", T1)
    assert await authz.can_consume(None, T1, "locked-sub")
    await authz.check_tenant_admin("nobody", "acme")
    authz.check_superuser("nobody")


async def test_namespace_actions_and_tenant_admin(store) -> None:  # type: ignore[no-untyped-def]
    authz = service(store)
    assert await authz.can_namespace_action("fn", "acme/ns", "functions")
    assert not await authz.can_namespace_action("fn", "acme/ns", "sources")
    assert await authz.can_namespace_action("acme-admin", "acme/ns", "packages")
    assert await authz.is_tenant_admin("super", "anything")
    assert await authz.is_tenant_admin("acme-admin", "acme")
    assert not await authz.is_tenant_admin("acme-admin", "other")
    assert not await authz.is_tenant_admin("acme-admin", "missing-tenant")
    with pytest.raises(ValueError):
        await authz.can_namespace_action("fn", "acme/ns", "fly")


async def test_proxy_needs_both_roles_allowed(store) -> None:  # type: ignore[no-untyped-def]
    authz = service(store, proxy_roles=frozenset({"proxy", "super"}))
    assert not await authz.can_produce("proxy", T1, original_role="ns-producer")  # proxy itself not granted
    await PermissionStore(store).grant_permission("acme/ns", "proxy", ["produce"])
    assert await authz.can_produce("proxy", T1, original_role="ns-producer")
    assert not await authz.can_produce("proxy", T1, original_role="nobody")
    assert await authz.can_produce("super", T1, original_role="ns-producer")  # a super-user proxy
    assert not await authz.can_produce("super", T1, original_role="nobody")


async def test_check_forms_raise_typed_errors(store) -> None:  # type: ignore[no-untyped-def]
    authz = service(store)
    with pytest.raises(AuthorizationError, match="'nobody' is not authorized to produce") as info:
        await authz.check_produce("nobody", T1)
    assert info.value.server_error is Code.AuthorizationError and info.value.http_status == 403
    with pytest.raises(AuthorizationError, match="locked-sub"):
        await authz.check_consume("both", T1, "locked-sub")
    with pytest.raises(AuthorizationError):
        await authz.check_lookup("nobody", T1)
    with pytest.raises(AuthorizationError, match="not an admin of tenant 'other'"):
        await authz.check_tenant_admin("acme-admin", "other")
    with pytest.raises(AuthorizationError, match="super-user"):
        authz.check_superuser("acme-admin")
    await authz.check_produce("ns-producer", T1)
    await authz.check_consume("ns-consumer", T1, "locked-sub")


async def test_revocation_takes_effect_on_the_next_check(store) -> None:  # type: ignore[no-untyped-def]
    authz = service(store)
    assert await authz.can_produce("ns-producer", T1)
    await PermissionStore(store).revoke_permission("acme/ns", "ns-producer")
    assert not await authz.can_produce("ns-producer", T1)


async def test_corrupt_policies_deny_instead_of_crashing(store) -> None:  # type: ignore[no-untyped-def]
    await store.put("/admin/policies/acme/ns", b"{not json")
    await store.put("/admin/policies/acme", b"[1,2]")
    authz = service(store)
    assert not await authz.can_produce("ns-producer", T1)
    assert not await authz.is_tenant_admin("acme-admin", "acme")
