"""AuthorizationService: may this role do that, read from namespace policies.

Theory of operation: permissions live where Pulsar keeps them, in the metadata
store -- tenant admins in TenantInfo ``adminRoles`` (``/admin/policies/{tenant}``),
grants in the namespace Policies' ``auth_policies``
(``/admin/policies/{tenant}/{ns}``)::

    "auth_policies": {
      "namespace_auth": {role: [action, ...]},
      "destination_auth": {topic: {role: [action, ...]}},
      "subscription_auth_roles": {subscription: [role, ...]}
    }

Decisions, in Pulsar's order (PulsarAuthorizationProvider):

1. authorization disabled -> allowed;  a null role -> denied.
2. a super-user (``superUserRoles``) -> allowed.
3. for topic operations: a tenant admin of the topic's tenant -> allowed.
4. produce: ``produce`` granted on the namespace or on the topic (or on the
   partitioned topic a partition belongs to).
5. consume: if the subscription has ``subscription_auth_roles`` (non-empty),
   the role must be listed; with ``subscription_auth_mode`` = ``Prefix`` the
   subscription name must start with the role; then ``consume`` as in 4.
6. lookup: produce or consume allowed.
7. namespace actions (functions, sources, sinks, packages): granted on the namespace.

With ``authorizationAllowWildcardsMatching`` a granted role ``abc*`` matches
roles starting with ``abc`` and ``*xyz`` roles ending with ``xyz``.

A proxy (a role in ``proxyRoles``) acts for the client it forwards: pass that
client's role as ``original_role`` and both must be allowed (a proxy that is a
super-user only needs the client to be allowed).

Every check reads the store (no cache here): a grant or revoke takes effect
on the next check.  ``check_*`` raise AuthorizationError with the message the
client sees; ``can_*`` answer a bool.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.errors import AuthorizationError
from magnetar.common.naming import NamespaceName, TopicName
from magnetar.metadata.api import MetadataStore

AUTH_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")
POLICIES_ROOT = "/admin/policies"


def tenant_path(tenant: str) -> str:
    return f"{POLICIES_ROOT}/{tenant}"


def namespace_path(namespace: str | NamespaceName) -> str:
    return f"{POLICIES_ROOT}/{namespace}"


def role_matches(granted: str, role: str, wildcards: bool) -> bool:
    if granted == role:
        return True
    if not wildcards or not granted:
        return False
    if granted.endswith("*") and role.startswith(granted[:-1]):
        return True
    return granted.startswith("*") and role.endswith(granted[1:])


class AuthorizationService:
    def __init__(self, config: AuthConfig, store: MetadataStore) -> None:
        self.config = config
        self._store = store
        # A plugin AuthorizationProvider (``authorizationProvider``, broker.plugins) decides
        # produce/consume instead of the namespace/topic grants; super-users still pass first.
        self.provider: Any = None

    @property
    def enabled(self) -> bool:
        return self.config.authorization_enabled

    # ------------------------------------------------------------------ roles
    def is_superuser(self, role: str | None) -> bool:
        return role is not None and role in self.config.super_user_roles

    def is_proxy_role(self, role: str | None) -> bool:
        return role is not None and role in self.config.proxy_roles

    async def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        """Super-user, or listed in the tenant's ``adminRoles``."""
        if role is None:
            return False
        if self.is_superuser(role):
            return True
        info = await self._read_json(tenant_path(tenant))
        return info is not None and role in (info.get("adminRoles") or ())

    # ------------------------------------------------------------------ topic operations
    async def can_produce(
        self, role: str | None, topic: str | TopicName, original_role: str | None = None
    ) -> bool:
        p = self.provider
        if p is not None:
            return await self._each_role(role, original_role, lambda r: p.can_produce(r, str(topic)))
        return await self._each_role(role, original_role, lambda r: self._topic_action(r, topic, "produce"))

    async def can_consume(
        self,
        role: str | None,
        topic: str | TopicName,
        subscription: str | None = None,
        original_role: str | None = None,
    ) -> bool:
        p = self.provider
        if p is not None:
            return await self._each_role(
                role, original_role, lambda r: p.can_consume(r, str(topic), subscription)
            )
        return await self._each_role(role, original_role, lambda r: self._consume(r, topic, subscription))

    async def can_lookup(
        self, role: str | None, topic: str | TopicName, original_role: str | None = None
    ) -> bool:
        return await self.can_produce(role, topic, original_role) or await self.can_consume(
            role, topic, None, original_role
        )

    async def can_namespace_action(
        self, role: str | None, namespace: str | NamespaceName, action: str, original_role: str | None = None
    ) -> bool:
        """functions / sources / sinks / packages (or produce/consume) granted on the namespace."""
        _check_action(action)
        ns = NamespaceName.get(str(namespace))

        async def one(r: str) -> bool:
            if await self.is_tenant_admin(r, ns.tenant):
                return True
            policies = await self._read_json(namespace_path(ns))
            return policies is not None and self._granted(_auth(policies).get("namespace_auth"), r, action)

        return await self._each_role(role, original_role, one)

    # ------------------------------------------------------------------ raising forms
    async def check_produce(
        self, role: str | None, topic: str | TopicName, original_role: str | None = None
    ) -> None:
        if not await self.can_produce(role, topic, original_role):
            raise AuthorizationError(f"Client with role {role!r} is not authorized to produce on {topic}")

    async def check_consume(
        self,
        role: str | None,
        topic: str | TopicName,
        subscription: str | None,
        original_role: str | None = None,
    ) -> None:
        if not await self.can_consume(role, topic, subscription, original_role):
            raise AuthorizationError(
                f"Client with role {role!r} is not authorized to consume from {topic}"
                + (f" with subscription {subscription!r}" if subscription else "")
            )

    async def check_lookup(
        self, role: str | None, topic: str | TopicName, original_role: str | None = None
    ) -> None:
        if not await self.can_lookup(role, topic, original_role):
            raise AuthorizationError(f"Client with role {role!r} is not authorized to lookup {topic}")

    async def namespace_exists(self, namespace: str | NamespaceName) -> bool:
        """Whether the namespace's policies exist (a refusal there is "not found", not "forbidden")."""
        return await self._store.exists(namespace_path(namespace)) is not None

    async def check_tenant_admin(self, role: str | None, tenant: str) -> None:
        if not self.enabled:
            return
        if not await self.is_tenant_admin(role, tenant):
            raise AuthorizationError(f"Client with role {role!r} is not an admin of tenant {tenant!r}")

    def check_superuser(self, role: str | None) -> None:
        if self.enabled and not self.is_superuser(role):
            raise AuthorizationError(f"Client with role {role!r} is not a super-user")

    # ------------------------------------------------------------------ internals
    async def _each_role(self, role: str | None, original_role: str | None, check: Any) -> bool:
        if not self.enabled:
            return True
        if role is None:
            return False
        if original_role is not None and self.is_proxy_role(role):
            if not await self._one_role(original_role, check):
                return False
            return self.is_superuser(role) or await self._one_role(role, check)
        return await self._one_role(role, check)

    async def _one_role(self, role: str, check: Any) -> bool:
        if self.is_superuser(role):
            return True
        return bool(await check(role))

    async def _topic_action(self, role: str, topic: str | TopicName, action: str) -> bool:
        tn = topic if isinstance(topic, TopicName) else TopicName.get(topic)
        if await self.is_tenant_admin(role, tn.namespace.tenant):
            return True
        policies = await self._read_json(namespace_path(tn.namespace))
        if policies is None:
            return False
        auth = _auth(policies)
        if self._granted(auth.get("namespace_auth"), role, action):
            return True
        per_topic = auth.get("destination_auth") or {}
        names = {str(tn), tn.partitioned_topic_name} if tn.is_partitioned else {str(tn)}
        return any(self._granted(per_topic.get(name), role, action) for name in sorted(names))

    async def _consume(self, role: str, topic: str | TopicName, subscription: str | None) -> bool:
        tn = topic if isinstance(topic, TopicName) else TopicName.get(topic)
        if await self.is_tenant_admin(role, tn.namespace.tenant):
            return True
        if subscription:
            policies = await self._read_json(namespace_path(tn.namespace))
            if policies is None:
                return False
            allowed = (_auth(policies).get("subscription_auth_roles") or {}).get(subscription)
            if allowed and not any(role_matches(g, role, False) for g in allowed):
                return False
            if policies.get("subscription_auth_mode") == "Prefix" and not subscription.startswith(role):
                return False
        return await self._topic_action(role, tn, "consume")

    def _granted(self, grants: dict[str, Iterable[str]] | None, role: str, action: str) -> bool:
        if not grants:
            return False
        wild = self.config.authorization_allow_wildcards_matching
        return any(action in (actions or ()) and role_matches(g, role, wild) for g, actions in grants.items())

    async def _read_json(self, path: str) -> dict[str, Any] | None:
        res = await self._store.get(path)
        if res is None or not res.value:
            return None
        try:
            doc = json.loads(res.value)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None


def _auth(policies: dict[str, Any]) -> dict[str, Any]:
    auth = policies.get("auth_policies")
    return auth if isinstance(auth, dict) else {}


def _check_action(action: str) -> None:
    if action not in AUTH_ACTIONS:
        raise ValueError(f"unknown AuthAction {action!r} (one of {', '.join(AUTH_ACTIONS)})")
