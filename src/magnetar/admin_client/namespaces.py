"""Namespaces: ``/admin/v2/namespaces`` -- lifecycle, permissions, bundles and every policy.

Theory of operation: lifecycle, permission, bundle and backlog operations are
written out below; the many get/set/remove policy endpoints of the common
shape come from the policy table (``policies.POLICIES``) through
:func:`install_policy_methods`, so ``set_retention``, ``get_max_producers``,
``remove_dispatch_rate`` ... all exist with the namespace API's suffixes and
verbs.  Getters of a policy return None when it is unset (Pulsar's 204).
Namespaces are ``tenant/ns`` strings (validated with Pulsar's name rules
before anything is sent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from magnetar.admin_client.core import Expect, Resource, call, ns_path, seg
from magnetar.admin_client.policies import PolicySpec, install_policy_methods
from magnetar.common.rest_enums import BacklogQuotaType

if TYPE_CHECKING:  # the bodies (pydantic) are imported where one is built, not by this module
    from magnetar.admin_client.models import BacklogQuota

BASE = "/admin/v2/namespaces"


def _path(namespace: str, suffix: str = "") -> str:
    return f"{BASE}/{ns_path(namespace)}" + (f"/{suffix}" if suffix else "")


class Namespaces(Resource):
    # ------------------------------------------------------------ lifecycle
    def list(self, tenant: str) -> Any:
        """``["tenant/ns1", ...]``."""
        return self._run(call("GET", f"{BASE}/{seg(tenant)}"))

    def get_topics(
        self, namespace: str, *, mode: str | None = None, include_system_topic: bool = False
    ) -> Any:
        """Topics of the namespace; ``mode`` is PERSISTENT (default), NON_PERSISTENT or ALL."""
        params = {"mode": mode, "includeSystemTopic": True if include_system_topic else None}
        return self._run(call("GET", _path(namespace, "topics"), params=params))

    def get_policies(self, namespace: str) -> Any:
        """The namespace's whole Policies JSON."""
        return self._run(call("GET", _path(namespace)))

    def create(
        self,
        namespace: str,
        *,
        bundles: int | None = None,
        clusters: Iterable[str] | None = None,
        policies: Mapping[str, Any] | None = None,
    ) -> Any:
        """Create a namespace, like ``pulsar-admin namespaces create -b N -c a,b``."""
        body: dict[str, Any] = dict(policies or {})
        if bundles is not None:
            body["bundles"] = {"numBundles": int(bundles)}
        if clusters:
            body["replication_clusters"] = list(clusters)
        if body:
            return self._run(call("PUT", _path(namespace), body=body, expect=Expect.NONE))
        return self._run(call("PUT", _path(namespace), expect=Expect.NONE))

    def delete(self, namespace: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", _path(namespace), params=params, expect=Expect.NONE))

    def delete_bundle(self, namespace: str, bundle: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", _path(namespace, seg(bundle)), params=params, expect=Expect.NONE))

    # ------------------------------------------------------------ permissions
    def get_permissions(self, namespace: str) -> Any:
        return self._run(call("GET", _path(namespace, "permissions")))

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> Any:
        path = _path(namespace, f"permissions/{seg(role)}")
        return self._run(call("POST", path, body=[str(a) for a in actions], expect=Expect.NONE))

    def revoke_permission(self, namespace: str, role: str) -> Any:
        return self._run(call("DELETE", _path(namespace, f"permissions/{seg(role)}"), expect=Expect.NONE))

    def get_subscription_permissions(self, namespace: str) -> Any:
        return self._run(call("GET", _path(namespace, "permissions/subscription")))

    def grant_subscription_permission(self, namespace: str, subscription: str, roles: Iterable[str]) -> Any:
        path = _path(namespace, f"permissions/subscription/{seg(subscription)}")
        return self._run(call("POST", path, body=list(roles), expect=Expect.NONE))

    def revoke_subscription_permission(self, namespace: str, subscription: str, role: str) -> Any:
        path = _path(namespace, f"permissions/{seg(subscription)}/{seg(role)}")
        return self._run(call("DELETE", path, expect=Expect.NONE))

    # ------------------------------------------------------------ bundles and backlog
    def get_bundles(self, namespace: str) -> Any:
        """BundlesData ``{"boundaries": [...], "numBundles": N}``."""
        return self._run(call("GET", _path(namespace, "bundles")))

    def unload(
        self, namespace: str, *, bundle: str | None = None, destination_broker: str | None = None
    ) -> Any:
        if bundle is None:
            return self._run(call("PUT", _path(namespace, "unload"), expect=Expect.NONE))
        params = {"destinationBroker": destination_broker}
        return self._run(
            call("PUT", _path(namespace, f"{seg(bundle)}/unload"), params=params, expect=Expect.NONE)
        )

    def split_bundle(
        self,
        namespace: str,
        bundle: str,
        *,
        unload: bool = False,
        split_algorithm_name: str | None = None,
        boundaries: list[int] | None = None,
    ) -> Any:
        params = {"unload": unload, "splitAlgorithmName": split_algorithm_name}
        path = _path(namespace, f"{seg(bundle)}/split")
        if boundaries:
            return self._run(call("PUT", path, params=params, body=list(boundaries), expect=Expect.NONE))
        return self._run(call("PUT", path, params=params, expect=Expect.NONE))

    def clear_backlog(
        self, namespace: str, *, bundle: str | None = None, subscription: str | None = None
    ) -> Any:
        suffix = f"{seg(bundle)}/clearBacklog" if bundle else "clearBacklog"
        if subscription:
            suffix += f"/{seg(subscription)}"
        return self._run(call("POST", _path(namespace, suffix), expect=Expect.NONE))

    def unsubscribe(self, namespace: str, subscription: str, *, bundle: str | None = None) -> Any:
        suffix = (f"{seg(bundle)}/" if bundle else "") + f"unsubscribe/{seg(subscription)}"
        return self._run(call("POST", _path(namespace, suffix), expect=Expect.NONE))

    # ------------------------------------------------------------ policies with their own shape
    def get_message_ttl(self, namespace: str) -> Any:
        """TTL in seconds, None when unset."""
        return self._run(call("GET", _path(namespace, "messageTTL")))

    def set_message_ttl(self, namespace: str, ttl_s: int) -> Any:
        return self._run(call("POST", _path(namespace, "messageTTL"), body=int(ttl_s), expect=Expect.NONE))

    def remove_message_ttl(self, namespace: str) -> Any:
        return self._run(call("DELETE", _path(namespace, "messageTTL"), expect=Expect.NONE))

    def get_backlog_quotas(self, namespace: str) -> Any:
        """``{"destination_storage": BacklogQuota, "message_age": ...}`` (only set types)."""
        return self._run(call("GET", _path(namespace, "backlogQuotaMap")))

    def set_backlog_quota(
        self,
        namespace: str,
        quota: BacklogQuota | Mapping[str, Any],
        quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE,
    ) -> Any:
        params = {"backlogQuotaType": str(quota_type)}
        return self._run(
            call("POST", _path(namespace, "backlogQuota"), params=params, body=quota, expect=Expect.NONE)
        )

    def remove_backlog_quota(
        self, namespace: str, quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE
    ) -> Any:
        params = {"backlogQuotaType": str(quota_type)}
        return self._run(call("DELETE", _path(namespace, "backlogQuota"), params=params, expect=Expect.NONE))

    def get_properties(self, namespace: str) -> Any:
        return self._run(call("GET", _path(namespace, "properties")))

    def set_properties(self, namespace: str, properties: Mapping[str, str]) -> Any:
        return self._run(
            call("PUT", _path(namespace, "properties"), body=dict(properties), expect=Expect.NONE)
        )

    def clear_properties(self, namespace: str) -> Any:
        return self._run(call("DELETE", _path(namespace, "properties"), expect=Expect.NONE))

    def get_property(self, namespace: str, key: str) -> Any:
        return self._run(call("GET", _path(namespace, f"property/{seg(key)}")))

    def set_property(self, namespace: str, key: str, value: str) -> Any:
        return self._run(
            call("PUT", _path(namespace, f"property/{seg(key)}/{seg(value)}"), expect=Expect.NONE)
        )

    def remove_property(self, namespace: str, key: str) -> Any:
        return self._run(call("DELETE", _path(namespace, f"property/{seg(key)}"), expect=Expect.NONE))

    def get_resource_group(self, namespace: str) -> Any:
        return self._run(call("GET", _path(namespace, "resourcegroup")))

    def set_resource_group(self, namespace: str, group: str) -> Any:
        return self._run(call("POST", _path(namespace, f"resourcegroup/{seg(group)}"), expect=Expect.NONE))

    def remove_resource_group(self, namespace: str) -> Any:
        return self._run(call("DELETE", _path(namespace, "resourcegroup"), expect=Expect.NONE))

    def set_anti_affinity_group(self, namespace: str, group: str) -> Any:
        """The group as a JSON string (brokers accept it quoted or, as Java sends it, unquoted)."""
        return self._run(call("POST", _path(namespace, "antiAffinity"), body=group, expect=Expect.NONE))

    def get_anti_affinity_namespaces(self, cluster: str, group: str, tenant: str | None = None) -> Any:
        path = f"{BASE}/{seg(cluster)}/antiAffinity/{seg(group)}"
        return self._run(call("GET", path, params={"tenant": tenant}))

    def set_dispatcher_pause_on_ack_state_persistent(self, namespace: str) -> Any:
        path = _path(namespace, "dispatcherPauseOnAckStatePersistent")
        return self._run(call("POST", path, expect=Expect.NONE))


def _get(spec: PolicySpec, suffix: str) -> Callable[..., Any]:
    def get(self: Namespaces, namespace: str) -> Any:
        return self._run(call("GET", _path(namespace, suffix)))

    return get


def _set(spec: PolicySpec, suffix: str, method: str) -> Callable[..., Any]:
    def set_(self: Namespaces, namespace: str, value: Any) -> Any:
        return self._run(call(method, _path(namespace, suffix), body=value, expect=Expect.NONE))

    return set_


def _remove(spec: PolicySpec, suffix: str) -> Callable[..., Any]:
    def remove(self: Namespaces, namespace: str) -> Any:
        return self._run(call("DELETE", _path(namespace, suffix), expect=Expect.NONE))

    return remove


install_policy_methods(Namespaces, "ns", _get, _set, _remove)
