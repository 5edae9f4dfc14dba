"""PermissionStore: grant/revoke edits of auth_policies, Pulsar's semantics and errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from magnetar.broker.auth.permissions import InvalidPermissionError, PermissionStore
from magnetar.broker.errors import NamespaceNotFoundError, PreconditionFailedError
from magnetar.metadata.memory import MemoryMetadataServer

NS = "acme/ns"
TOPIC = "persistent://acme/ns/t"


@pytest.fixture
async def store():  # type: ignore[no-untyped-def]
    s = MemoryMetadataServer().session()
    await s.put(
        "/admin/policies/acme/ns", json.dumps({"message_ttl_in_seconds": 7, "deleted": False}).encode()
    )
    yield s
    await s.aclose()


async def doc(store) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return json.loads((await store.get("/admin/policies/acme/ns")).value)


async def test_grant_replaces_and_keeps_other_fields(store) -> None:  # type: ignore[no-untyped-def]
    perms = PermissionStore(store)
    await perms.grant_permission(NS, "r", ["consume", "produce", "produce"])
    assert await perms.get_permissions(NS) == {"r": ["consume", "produce"]}
    await perms.grant_permission(NS, "r", ["produce"])
    assert await perms.get_permissions(NS) == {"r": ["produce"]}
    d = await doc(store)
    assert d["message_ttl_in_seconds"] == 7
    assert d["auth_policies"] == {
        "namespace_auth": {"r": ["produce"]},
        "destination_auth": {},
        "subscription_auth_roles": {},
    }
    await perms.revoke_permission(NS, "r")
    await perms.revoke_permission(NS, "never-granted")  # not an error, as in Pulsar
    assert await perms.get_permissions(NS) == {}


async def test_topic_grants_and_union(store) -> None:  # type: ignore[no-untyped-def]
    perms = PermissionStore(store)
    await perms.grant_permission(NS, "r", ["consume"])
    await perms.grant_topic_permission(TOPIC, "r", ["produce"])
    await perms.grant_topic_permission(TOPIC, "s", ["consume"])
    assert (await doc(store))["auth_policies"]["destination_auth"] == {
        TOPIC: {"r": ["produce"], "s": ["consume"]}
    }
    assert await perms.get_topic_permissions(TOPIC) == {"r": ["consume", "produce"], "s": ["consume"]}
    await perms.revoke_topic_permission(TOPIC, "r")
    await perms.revoke_topic_permission(TOPIC, "s")
    assert (await doc(store))["auth_policies"]["destination_auth"] == {}
    with pytest.raises(PreconditionFailedError, match="not set at the topic level"):
        await perms.revoke_topic_permission(TOPIC, "r")


async def test_subscription_permissions(store) -> None:  # type: ignore[no-untyped-def]
    perms = PermissionStore(store)
    await perms.grant_subscription_permission(NS, "sub", ["b", "a", "a"])
    assert await perms.get_subscription_permissions(NS) == {"sub": ["a", "b"]}
    await perms.revoke_subscription_permission(NS, "sub", "a")
    await perms.revoke_subscription_permission(NS, "sub", "zzz")
    await perms.revoke_subscription_permission(NS, "no-such-sub", "a")
    assert await perms.get_subscription_permissions(NS) == {"sub": ["b"]}


async def test_errors_change_nothing(store) -> None:  # type: ignore[no-untyped-def]
    perms = PermissionStore(store)
    before = (await store.get("/admin/policies/acme/ns")).stat.version
    with pytest.raises(InvalidPermissionError, match="unknown action 'fly'") as info:
        await perms.grant_permission(NS, "r", ["produce", "fly"])
    assert info.value.http_status == 400
    with pytest.raises(InvalidPermissionError):
        await perms.grant_permission(NS, "", ["produce"])
    with pytest.raises(NamespaceNotFoundError) as nf:
        await perms.grant_permission("acme/missing", "r", ["produce"])
    assert nf.value.http_status == 404
    with pytest.raises(NamespaceNotFoundError):
        await perms.get_permissions("acme/missing")
    assert (await store.get("/admin/policies/acme/ns")).stat.version == before


async def test_concurrent_grants_all_land(store) -> None:  # type: ignore[no-untyped-def]
    perms = PermissionStore(store)
    await asyncio.gather(*(perms.grant_permission(NS, f"role-{i}", ["produce"]) for i in range(10)))
    assert sorted(await perms.get_permissions(NS)) == sorted(f"role-{i}" for i in range(10))
