"""Operation-level authorization: Pulsar's TopicOperation / NamespaceOperation / TenantOperation.

Theory of operation: the admin REST layer and the broker ask "may role R do
operation O on resource X" rather than naming actions, so every endpoint can
be listed in a table with the operation it performs (and a test can fail
when an endpoint has none).  This module maps each operation to the rule
Pulsar's default authorization provider applies:

* topic LOOKUP / GET_STATS / GET_METADATA -> produce or consume;
  PRODUCE -> produce;  CONSUME / SUBSCRIBE / UNSUBSCRIBE / GET_SUBSCRIPTIONS /
  SKIP / EXPIRE_MESSAGES / PEEK_MESSAGES / RESET_CURSOR / GET_BACKLOG_SIZE /
  replicated-subscription status -> consume (with the subscription's own
  rules when one is named);  everything administrative (TERMINATE, COMPACT,
  OFFLOAD, UNLOAD, metadata and bundle-range changes, permissions) -> tenant admin;
* namespace GET_TOPIC / GET_TOPICS / GET_BUNDLE -> produce or consume granted on
  the namespace;  UNSUBSCRIBE / CLEAR_BACKLOG -> consume;  PACKAGES -> packages;
  the rest (CREATE_TOPIC, DELETE_TOPIC, bundles, permissions) -> tenant admin;
* tenant operations and every namespace/topic *policy* read or write -> tenant admin.

Super-users pass everything and, for topic operations, tenant admins too
(AuthorizationService applies both).  With authorization disabled every
check passes.  ``check_*`` raise AuthorizationError (403) naming the operation.
"""

from __future__ import annotations

import enum

from magnetar.broker.auth.authorization import AuthorizationService
from magnetar.broker.auth.errors import AuthorizationError
from magnetar.common.naming import NamespaceName, TopicName


class TopicOperation(enum.Enum):
    LOOKUP = "LOOKUP"
    PRODUCE = "PRODUCE"
    GET_SUBSCRIPTIONS = "GET_SUBSCRIPTIONS"
    SUBSCRIBE = "SUBSCRIBE"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    CONSUME = "CONSUME"
    COMPACT = "COMPACT"
    EXPIRE_MESSAGES = "EXPIRE_MESSAGES"
    OFFLOAD = "OFFLOAD"
    PEEK_MESSAGES = "PEEK_MESSAGES"
    RESET_CURSOR = "RESET_CURSOR"
    SKIP = "SKIP"
    TERMINATE = "TERMINATE"
    UNLOAD = "UNLOAD"
    GRANT_PERMISSION = "GRANT_PERMISSION"
    GET_PERMISSION = "GET_PERMISSION"
    REVOKE_PERMISSION = "REVOKE_PERMISSION"
    ADD_BUNDLE_RANGE = "ADD_BUNDLE_RANGE"
    GET_BUNDLE_RANGE = "GET_BUNDLE_RANGE"
    DELETE_BUNDLE_RANGE = "DELETE_BUNDLE_RANGE"
    GET_STATS = "GET_STATS"
    GET_METADATA = "GET_METADATA"
    UPDATE_METADATA = "UPDATE_METADATA"
    DELETE_METADATA = "DELETE_METADATA"
    GET_BACKLOG_SIZE = "GET_BACKLOG_SIZE"
    SET_REPLICATED_SUBSCRIPTION_STATUS = "SET_REPLICATED_SUBSCRIPTION_STATUS"
    GET_REPLICATED_SUBSCRIPTION_STATUS = "GET_REPLICATED_SUBSCRIPTION_STATUS"


class NamespaceOperation(enum.Enum):
    CREATE_TOPIC = "CREATE_TOPIC"
    GET_TOPIC = "GET_TOPIC"
    GET_TOPICS = "GET_TOPICS"
    DELETE_TOPIC = "DELETE_TOPIC"
    ADD_BUNDLE = "ADD_BUNDLE"
    DELETE_BUNDLE = "DELETE_BUNDLE"
    GET_BUNDLE = "GET_BUNDLE"
    GET_PERMISSION = "GET_PERMISSION"
    GRANT_PERMISSION = "GRANT_PERMISSION"
    REVOKE_PERMISSION = "REVOKE_PERMISSION"
    CLEAR_BACKLOG = "CLEAR_BACKLOG"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    PACKAGES = "PACKAGES"


class TenantOperation(enum.Enum):
    CREATE_NAMESPACE = "CREATE_NAMESPACE"
    DELETE_NAMESPACE = "DELETE_NAMESPACE"
    LIST_NAMESPACES = "LIST_NAMESPACES"


class PolicyOperation(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"


_T = TopicOperation
TOPIC_PRODUCE_OR_CONSUME = frozenset({_T.LOOKUP, _T.GET_STATS, _T.GET_METADATA})
TOPIC_PRODUCE = frozenset({_T.PRODUCE})
TOPIC_CONSUME = frozenset(
    {
        _T.CONSUME, _T.SUBSCRIBE, _T.UNSUBSCRIBE, _T.GET_SUBSCRIPTIONS, _T.SKIP, _T.EXPIRE_MESSAGES,
        _T.PEEK_MESSAGES, _T.RESET_CURSOR, _T.GET_BACKLOG_SIZE,
        _T.SET_REPLICATED_SUBSCRIPTION_STATUS, _T.GET_REPLICATED_SUBSCRIPTION_STATUS,
    }
)  # fmt: skip
TOPIC_TENANT_ADMIN = frozenset(TopicOperation) - TOPIC_PRODUCE_OR_CONSUME - TOPIC_PRODUCE - TOPIC_CONSUME

_N = NamespaceOperation
NAMESPACE_PRODUCE_OR_CONSUME = frozenset({_N.GET_TOPIC, _N.GET_TOPICS, _N.GET_BUNDLE})
NAMESPACE_CONSUME = frozenset({_N.UNSUBSCRIBE, _N.CLEAR_BACKLOG})
NAMESPACE_PACKAGES = frozenset({_N.PACKAGES})
NAMESPACE_TENANT_ADMIN = (
    frozenset(NamespaceOperation) - NAMESPACE_PRODUCE_OR_CONSUME - NAMESPACE_CONSUME - NAMESPACE_PACKAGES
)


class OperationAuthorizer:
    def __init__(self, authz: AuthorizationService) -> None:
        self.authz = authz

    async def allow_topic_operation(
        self,
        role: str | None,
        topic: str | TopicName,
        operation: TopicOperation,
        subscription: str | None = None,
        original_role: str | None = None,
    ) -> bool:
        tn = topic if isinstance(topic, TopicName) else TopicName.get(topic)
        if operation in TOPIC_PRODUCE:
            return await self.authz.can_produce(role, tn, original_role)
        if operation in TOPIC_CONSUME:
            return await self.authz.can_consume(role, tn, subscription, original_role)
        if operation in TOPIC_PRODUCE_OR_CONSUME:
            return await self.authz.can_lookup(role, tn, original_role)
        return await self._tenant_admin(role, tn.namespace.tenant, original_role)

    async def allow_namespace_operation(
        self,
        role: str | None,
        namespace: str | NamespaceName,
        operation: NamespaceOperation,
        original_role: str | None = None,
    ) -> bool:
        ns = namespace if isinstance(namespace, NamespaceName) else NamespaceName.get(namespace)
        if operation in NAMESPACE_PACKAGES:
            return await self.authz.can_namespace_action(role, ns, "packages", original_role)
        if operation in NAMESPACE_CONSUME:
            return await self.authz.can_namespace_action(role, ns, "consume", original_role)
        if operation in NAMESPACE_PRODUCE_OR_CONSUME:
            return await self.authz.can_namespace_action(
                role, ns, "produce", original_role
            ) or await self.authz.can_namespace_action(role, ns, "consume", original_role)
        return await self._tenant_admin(role, ns.tenant, original_role)

    async def allow_tenant_operation(
        self, role: str | None, tenant: str, operation: TenantOperation, original_role: str | None = None
    ) -> bool:
        return await self._tenant_admin(role, tenant, original_role)

    async def allow_policy_operation(
        self,
        role: str | None,
        tenant: str,
        operation: PolicyOperation,
        original_role: str | None = None,
    ) -> bool:
        """Namespace and topic policies, read or write: tenant admins (and super-users)."""
        return await self._tenant_admin(role, tenant, original_role)

    # ------------------------------------------------------------------ raising forms
    async def check_topic_operation(
        self,
        role: str | None,
        topic: str | TopicName,
        operation: TopicOperation,
        subscription: str | None = None,
        original_role: str | None = None,
    ) -> None:
        if not await self.allow_topic_operation(role, topic, operation, subscription, original_role):
            raise AuthorizationError(
                f"Client with role {role!r} is not authorized to {operation.value} on {topic}"
            )

    async def check_namespace_operation(
        self,
        role: str | None,
        namespace: str | NamespaceName,
        operation: NamespaceOperation,
        original_role: str | None = None,
    ) -> None:
        if not await self.allow_namespace_operation(role, namespace, operation, original_role):
            raise AuthorizationError(
                f"Client with role {role!r} is not authorized to {operation.value} on namespace {namespace}"
            )

    async def check_tenant_operation(
        self, role: str | None, tenant: str, operation: TenantOperation, original_role: str | None = None
    ) -> None:
        if not await self.allow_tenant_operation(role, tenant, operation, original_role):
            raise AuthorizationError(
                f"Client with role {role!r} is not authorized to {operation.value} on tenant {tenant}"
            )

    async def check_policy_operation(
        self, role: str | None, tenant: str, operation: PolicyOperation, original_role: str | None = None
    ) -> None:
        if not await self.allow_policy_operation(role, tenant, operation, original_role):
            raise AuthorizationError(
                f"Client with role {role!r} is not authorized to {operation.value} policies of tenant {tenant}"
            )

    async def _tenant_admin(self, role: str | None, tenant: str, original_role: str | None) -> bool:
        if not self.authz.enabled:
            return True
        if role is None:
            return False
        if original_role is not None and self.authz.is_proxy_role(role):
            if not await self.authz.is_tenant_admin(original_role, tenant):
                return False
            return self.authz.is_superuser(role) or await self.authz.is_tenant_admin(role, tenant)
        return await self.authz.is_tenant_admin(role, tenant)
