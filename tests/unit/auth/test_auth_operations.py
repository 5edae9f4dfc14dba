"""OperationAuthorizer: every Pulsar operation maps to a rule; table over roles x operations."""

from __future__ import annotations

import json

import pytest

from magnetar.broker.auth.authorization import AuthorizationService
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthorizationError
from magnetar.broker.auth.operations import (
    NAMESPACE_CONSUME,
    NAMESPACE_PACKAGES,
    NAMESPACE_PRODUCE_OR_CONSUME,
    NAMESPACE_TENANT_ADMIN,
    TOPIC_CONSUME,
    TOPIC_PRODUCE,
    TOPIC_PRODUCE_OR_CONSUME,
    TOPIC_TENANT_ADMIN,
    NamespaceOperation,
    OperationAuthorizer,
    PolicyOperation,
    TenantOperation,
    TopicOperation,
)
from magnetar.broker.auth.permissions import PermissionStore
from magnetar.metadata.memory import MemoryMetadataServer

TOPIC = "persistent://acme/ns/t"


def test_every_operation_has_exactly_one_rule() -> None:
    topic_groups = [TOPIC_PRODUCE_OR_CONSUME, TOPIC_PRODUCE, TOPIC_CONSUME, TOPIC_TENANT_ADMIN]
    for op in TopicOperation:
        assert sum(op in g for g in topic_groups) == 1, op
    ns_groups = [NAMESPACE_PRODUCE_OR_CONSUME, NAMESPACE_CONSUME, NAMESPACE_PACKAGES, NAMESPACE_TENANT_ADMIN]
    for nop in NamespaceOperation:
        assert sum(nop in g for g in ns_groups) == 1, nop
    assert (
        TopicOperation.TERMINATE in TOPIC_TENANT_ADMIN
        and TopicOperation.GRANT_PERMISSION in TOPIC_TENANT_ADMIN
    )


@pytest.fixture
async def ops():  # type: ignore[no-untyped-def]
    s = MemoryMetadataServer().session()
    await s.put("/admin/policies/acme", json.dumps({"adminRoles": ["acme-admin"]}).encode())
    await s.put("/admin/policies/acme/ns", json.dumps({"auth_policies": {}}).encode())
    perms = PermissionStore(s)
    await perms.grant_permission("acme/ns", "producer", ["produce"])
    await perms.grant_permission("acme/ns", "consumer", ["consume"])
    await perms.grant_permission("acme/ns", "packager", ["packages"])
    cfg = AuthConfig(authorization_enabled=True, super_user_roles=frozenset({"super"}))
    yield OperationAuthorizer(AuthorizationService(cfg, s))
    await s.aclose()


def _expected_topic(role: str, op: TopicOperation) -> bool:
    if role in ("super", "acme-admin"):
        return True
    if op in TOPIC_PRODUCE:
        return role == "producer"
    if op in TOPIC_CONSUME:
        return role == "consumer"
    if op in TOPIC_PRODUCE_OR_CONSUME:
        return role in ("producer", "consumer")
    return False


ROLES = ["super", "acme-admin", "producer", "consumer", "packager", "nobody"]


@pytest.mark.parametrize("role", ROLES)
async def test_topic_operations_table(ops: OperationAuthorizer, role: str) -> None:
    for op in TopicOperation:
        got = await ops.allow_topic_operation(role, TOPIC, op, subscription="s")
        assert got is _expected_topic(role, op), (role, op)


@pytest.mark.parametrize("role", ROLES)
async def test_namespace_tenant_and_policy_operations_table(ops: OperationAuthorizer, role: str) -> None:
    admin = role in ("super", "acme-admin")
    for op in NamespaceOperation:
        if op in NAMESPACE_TENANT_ADMIN:
            expected = admin
        elif op in NAMESPACE_PACKAGES:
            expected = admin or role == "packager"
        elif op in NAMESPACE_CONSUME:
            expected = admin or role == "consumer"
        else:
            expected = admin or role in ("producer", "consumer")
        assert await ops.allow_namespace_operation(role, "acme/ns", op) is expected, (role, op)
    for top in TenantOperation:
        assert await ops.allow_tenant_operation(role, "acme", top) is admin
    for pop in PolicyOperation:
        assert await ops.allow_policy_operation(role, "acme", pop) is admin


async def test_other_tenant_admin_is_refused_and_errors_name_the_operation(ops: OperationAuthorizer) -> None:
    assert not await ops.allow_tenant_operation("acme-admin", "other", TenantOperation.CREATE_NAMESPACE)
    with pytest.raises(AuthorizationError, match="TERMINATE") as info:
        await ops.check_topic_operation("producer", TOPIC, TopicOperation.TERMINATE)
    assert info.value.http_status == 403
    with pytest.raises(AuthorizationError, match="CREATE_TOPIC"):
        await ops.check_namespace_operation("producer", "acme/ns", NamespaceOperation.CREATE_TOPIC)
    with pytest.raises(AuthorizationError, match="DELETE_NAMESPACE"):
        await ops.check_tenant_operation("nobody", "acme", TenantOperation.DELETE_NAMESPACE)
    with pytest.raises(AuthorizationError, match="WRITE"):
        await ops.check_policy_operation(None, "acme", PolicyOperation.WRITE)
    await ops.check_topic_operation("producer", TOPIC, TopicOperation.PRODUCE)


async def test_disabled_allows_all() -> None:
    s = MemoryMetadataServer().session()
    o = OperationAuthorizer(AuthorizationService(AuthConfig(), s))
    assert await o.allow_tenant_operation(None, "x", TenantOperation.LIST_NAMESPACES)
    assert await o.allow_topic_operation("nobody", TOPIC, TopicOperation.TERMINATE)
    await s.aclose()
