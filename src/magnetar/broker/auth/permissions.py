"""Grant and revoke permissions: edits of a namespace's ``auth_policies``.

Theory of operation: the admin REST endpoints ``/namespaces/{t}/{ns}/permissions/...``
and ``/persistent/{t}/{ns}/{topic}/permissions/{role}`` call these functions.
Each is one compare-and-set update of the namespace Policies document
(``/admin/policies/{tenant}/{ns}``) through :class:`JsonStore`, so concurrent
grants do not lose each other and a refused request changes nothing.  Only
the ``auth_policies`` part of the document is touched; every other field is
written back as read.

Pulsar's semantics, kept:

* a grant *replaces* the role's set of actions (``grant produce`` after
  ``grant produce,consume`` leaves only produce);
* topic-level grants are keyed by the full topic name in ``destination_auth``;
  revoking a role that has no topic-level grant is 412 ("only set at namespace
  level");  granting on a partitioned topic is recorded on the partitioned
  name, which the authorization check also consults for each partition;
* subscription permissions (``subscription_auth_roles``) replace the role set
  of a subscription; revoking removes one role.

Errors: an unknown action -> InvalidPermissionError (400); a missing namespace
-> NamespaceNotFoundError (404); a missing topic-level grant on revoke ->
PreconditionFailedError (412).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from magnetar.broker.auth.authorization import AUTH_ACTIONS, namespace_path
from magnetar.broker.errors import BrokerError, Code, NamespaceNotFoundError, PreconditionFailedError
from magnetar.broker.resources.base import Doc, JsonStore
from magnetar.common.naming import NamespaceName, TopicName
from magnetar.metadata.api import MetadataStore, NotFound

MAX_ROLE_CHARS = 1024


class InvalidPermissionError(BrokerError):
    server_error = Code.NotAllowedError
    http_status = 400


def normalize_actions(actions: Iterable[str]) -> list[str]:
    out = set()
    for action in actions:
        if action not in AUTH_ACTIONS:
            raise InvalidPermissionError(f"unknown action {action!r} (one of {', '.join(AUTH_ACTIONS)})")
        out.add(action)
    return sorted(out)


def _check_role(role: str) -> None:
    if not role or len(role) > MAX_ROLE_CHARS:
        raise InvalidPermissionError("a role must be a non-empty string of at most 1024 characters")


class PermissionStore:
    def __init__(self, store: MetadataStore) -> None:
        self._js = JsonStore(store)

    # ------------------------------------------------------------------ reads
    async def get_permissions(self, namespace: str | NamespaceName) -> dict[str, list[str]]:
        """``GET /namespaces/{t}/{ns}/permissions``: role -> actions at namespace level."""
        auth = _auth(await self._policies(namespace))
        return {r: sorted(a) for r, a in (auth.get("namespace_auth") or {}).items()}

    async def get_subscription_permissions(self, namespace: str | NamespaceName) -> dict[str, list[str]]:
        auth = _auth(await self._policies(namespace))
        return {s: sorted(r) for s, r in (auth.get("subscription_auth_roles") or {}).items()}

    async def get_topic_permissions(self, topic: str | TopicName) -> dict[str, list[str]]:
        """``GET .../{topic}/permissions``: namespace grants united with the topic's own."""
        tn = _topic(topic)
        auth = _auth(await self._policies(tn.namespace))
        merged: dict[str, set[str]] = {r: set(a) for r, a in (auth.get("namespace_auth") or {}).items()}
        per_topic = auth.get("destination_auth") or {}
        for name in sorted({str(tn), tn.partitioned_topic_name}):
            for role, actions in (per_topic.get(name) or {}).items():
                merged.setdefault(role, set()).update(actions)
        return {r: sorted(a) for r, a in merged.items()}

    # ------------------------------------------------------------------ namespace level
    async def grant_permission(
        self, namespace: str | NamespaceName, role: str, actions: Iterable[str]
    ) -> None:
        _check_role(role)
        acts = normalize_actions(actions)

        def edit(auth: dict[str, Any]) -> None:
            auth.setdefault("namespace_auth", {})[role] = acts

        await self._update(namespace, edit)

    async def revoke_permission(self, namespace: str | NamespaceName, role: str) -> None:
        def edit(auth: dict[str, Any]) -> None:
            (auth.get("namespace_auth") or {}).pop(role, None)

        await self._update(namespace, edit)

    # ------------------------------------------------------------------ topic level
    async def grant_topic_permission(self, topic: str | TopicName, role: str, actions: Iterable[str]) -> None:
        _check_role(role)
        acts = normalize_actions(actions)
        tn = _topic(topic)

        def edit(auth: dict[str, Any]) -> None:
            auth.setdefault("destination_auth", {}).setdefault(str(tn), {})[role] = acts

        await self._update(tn.namespace, edit)

    async def revoke_topic_permission(self, topic: str | TopicName, role: str) -> None:
        tn = _topic(topic)

        def edit(auth: dict[str, Any]) -> None:
            per_topic = (auth.get("destination_auth") or {}).get(str(tn))
            if not per_topic or role not in per_topic:
                raise PreconditionFailedError(
                    f"Permissions are not set at the topic level for role {role!r} on {tn}"
                )
            del per_topic[role]
            if not per_topic:
                del auth["destination_auth"][str(tn)]

        await self._update(tn.namespace, edit)

    # ------------------------------------------------------------------ subscription level
    async def grant_subscription_permission(
        self, namespace: str | NamespaceName, subscription: str, roles: Iterable[str]
    ) -> None:
        role_list = sorted(set(roles))
        for role in role_list:
            _check_role(role)
        if not subscription:
            raise InvalidPermissionError("the subscription name is empty")

        def edit(auth: dict[str, Any]) -> None:
            auth.setdefault("subscription_auth_roles", {})[subscription] = role_list

        await self._update(namespace, edit)

    async def revoke_subscription_permission(
        self, namespace: str | NamespaceName, subscription: str, role: str
    ) -> None:
        def edit(auth: dict[str, Any]) -> None:
            roles = (auth.get("subscription_auth_roles") or {}).get(subscription)
            if roles is not None and role in roles:
                roles.remove(role)

        await self._update(namespace, edit)

    # ------------------------------------------------------------------ internals
    async def _policies(self, namespace: str | NamespaceName) -> Doc:
        doc = await self._js.get(namespace_path(namespace))
        if doc is None:
            raise NamespaceNotFoundError(f"Namespace {namespace} does not exist")
        return doc

    async def _update(self, namespace: str | NamespaceName, edit: Any) -> None:
        def apply(doc: Doc) -> Doc:
            auth = doc.get("auth_policies")
            if not isinstance(auth, dict):
                auth = {}
            for key in ("namespace_auth", "destination_auth", "subscription_auth_roles"):
                if not isinstance(auth.get(key), dict):
                    auth[key] = {}
            edit(auth)
            doc["auth_policies"] = auth
            return doc

        try:
            await self._js.update(namespace_path(namespace), apply)
        except NotFound:
            raise NamespaceNotFoundError(f"Namespace {namespace} does not exist") from None


def _auth(policies: Doc) -> dict[str, Any]:
    auth = policies.get("auth_policies")
    return auth if isinstance(auth, dict) else {}


def _topic(topic: str | TopicName) -> TopicName:
    return topic if isinstance(topic, TopicName) else TopicName.get(topic)
