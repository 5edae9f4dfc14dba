"""Namespace lifecycle and namespace policies over the ``Policies`` document.

Theory of operation: a namespace *is* its Policies JSON at
``/admin/policies/{tenant}/{ns}`` (``broker.resources.namespaces``).  Every
policy endpoint is a read or a CAS update of one field of that document,
driven by the policy table (``policies.SPECS``): GET answers the value or
``None`` (the web layer's 204) when unset, set validates then writes, DELETE
writes the spec's cleared value.  Pulsar's cross-policy rule that a backlog
quota must not exceed the retention size is checked on both sides (412).
After each write the listeners registered with :meth:`on_change` run (the
policy enforcer re-applies effective policies to live topics from there).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.broker import errors
from magnetar.broker.admin.policies import BY_NS_SUFFIX, PolicySpec, parse_value
from magnetar.broker.admin.tenancy import check_name, config_flag
from magnetar.broker.loadbalance.config import SPLIT_ALGORITHMS as LB_SPLIT_ALGORITHMS
from magnetar.broker.loadbalance.split import split_boundaries_at, split_point
from magnetar.broker.ownership.api import NotOwnedHere
from magnetar.broker.ownership.bundles import (
    SPLIT_ALGORITHMS,
    BundleError,
    NamespaceBundle,
    boundaries_of,
    ranges_of,
    require_range,
    split_boundaries,
    to_hex,
    topic_hash,
)
from magnetar.broker.resources import default_policies
from magnetar.broker.resources.namespaces import bundle_boundaries
from magnetar.broker.service.api import BrokerServiceView
from magnetar.common.lazy_import import lazy_import

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)

ChangeListener = Callable[[str], Awaitable[None]]
MB = 1024 * 1024


def retention_vs_quota(pol: dict) -> None:
    ret = pol.get("retention_policies") or None
    quota = (pol.get("backlog_quota_map") or {}).get("destination_storage")
    if not ret or not quota:
        return
    size_mb = ret.get("retentionSizeInMB", 0)
    limit = quota.get("limitSize", -1)
    if size_mb != -1 and limit is not None and limit > 0 and size_mb * MB < limit:
        raise errors.PreconditionFailedError(
            "Retention Quota must exceed configured backlog quota for namespace."
        )


class NamespaceAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc
        self._res = svc.resources
        self._listeners: list[ChangeListener] = []

    def on_change(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    async def _changed(self, namespace: str) -> None:
        for listener in self._listeners:
            await listener(namespace)

    # ------------------------------------------------------------ lifecycle
    async def list(self, tenant: str) -> list[str]:
        return sorted(await self._res.namespaces.list(tenant))

    async def policies(self, namespace: str) -> dict:
        return await self._res.namespaces.require(namespace)

    async def create(self, tenant: str, ns: str, body: dict | None) -> None:
        check_name("Namespace", ns)
        info = await self._res.tenants.get(tenant)
        if info is None:
            raise errors.TenantNotFoundError("Tenant does not exist")
        body = body or {}
        allowed = set(info.get("allowedClusters", []))
        clusters = (
            body.get("replication_clusters")
            or sorted(allowed & {self._svc.config.cluster_name})
            or sorted(allowed)[:1]
        )
        if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
            raise errors.PreconditionFailedError("replication_clusters must be a list of cluster names")
        for c in clusters:
            if c not in allowed:
                raise errors.PreconditionFailedError(f"Cluster {c} is not in the list of allowed clusters")
        bundles = body.get("bundles") or {}
        n = bundles.get("numBundles") if isinstance(bundles, dict) else None
        if n is None and isinstance(bundles, dict) and bundles.get("boundaries"):
            n = len(bundles["boundaries"]) - 1
        n = n or self._svc.config.default_number_of_namespace_bundles
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 1024:
            raise errors.PreconditionFailedError("Invalid number of bundles")
        pol = default_policies(clusters, n)
        for key, value in body.items():  # other Policies fields given at creation are kept
            if key in pol and key not in ("bundles", "replication_clusters", "deleted"):
                pol[key] = value
        await self._res.namespaces.create(f"{tenant}/{ns}", pol)

    async def delete(self, namespace: str, force: bool = False) -> None:
        await self._res.namespaces.require(namespace)
        topics = await self._svc.list_topics(namespace, mode="ALL")
        partitioned = await self._svc.list_partitioned_topics(namespace)
        if (topics or partitioned) and not force:
            raise errors.AlreadyExistsError("Cannot delete non empty namespace")
        if force and not config_flag(
            self._svc.config, "force_delete_namespace_allowed", "forceDeleteNamespaceAllowed"
        ):
            raise errors.NotAllowedError("Broker doesn't allow forced deletion of namespaces")
        for t in partitioned:
            await self._svc.delete_partitioned_topic(t, force=True)
        for t in await self._svc.list_topics(namespace, mode="ALL"):
            try:
                await self._svc.delete_topic(t, force=True)
            except errors.TopicNotFoundError:
                pass
        await self._res.namespaces.delete(namespace)

    async def bundles(self, namespace: str) -> dict:
        pol = await self._res.namespaces.require(namespace)
        b = pol.get("bundles") or {}
        n = int(b.get("numBundles") or 1)
        return {"boundaries": b.get("boundaries") or bundle_boundaries(n), "numBundles": n}

    async def bundle_names(self, namespace: str) -> list[str]:
        b = (await self.bundles(namespace))["boundaries"]
        return [f"{lo}_{hi}" for lo, hi in zip(b, b[1:], strict=False)]

    async def _bundle(self, namespace: str, bundle: str) -> tuple[dict, NamespaceBundle]:
        pol = await self._res.namespaces.require(namespace)
        bounds = boundaries_of(pol, self._svc.config.default_number_of_namespace_bundles)
        try:
            return pol, NamespaceBundle(namespace, require_range(bounds, bundle))
        except BundleError as exc:
            raise errors.PreconditionFailedError(str(exc)) from None

    async def unload(self, namespace: str) -> list[NamespaceBundle]:
        """Unloads every bundle of the namespace owned here; returns the bundles owned elsewhere
        (the web layer asks their owners)."""
        pol = await self._res.namespaces.require(namespace)
        bounds = boundaries_of(pol, self._svc.config.default_number_of_namespace_bundles)
        elsewhere = []
        for rng in ranges_of(bounds):
            try:
                await self._svc.namespace_service.unload_bundle(NamespaceBundle(namespace, rng))
            except NotOwnedHere:
                elsewhere.append(NamespaceBundle(namespace, rng))
        return elsewhere

    async def unload_bundle(self, namespace: str, bundle: str, destination: str | None = None) -> None:
        """Closes the bundle's topics and releases it (NotOwnedHere -> 307 to the owner)."""
        _, nb = await self._bundle(namespace, bundle)
        if destination:
            await self._svc.namespace_service.unload_bundle(nb, destination)
        else:
            await self._svc.namespace_service.unload_bundle(nb)

    async def split_bundle(self, namespace: str, bundle: str, algorithm: str | None = None) -> None:
        """Splits ``bundle`` in two (``range_equally_divide``, or ``topic_count_equally_divide``:
        half of its topics each side, see broker.loadbalance.split); its topics are unloaded and
        the halves are placed afresh on their next lookup."""
        _, nb = await self._bundle(namespace, bundle)
        algorithm = algorithm or "range_equally_divide"
        if algorithm not in SPLIT_ALGORITHMS and algorithm not in LB_SPLIT_ALGORITHMS:
            raise errors.PreconditionFailedError(f"Unsupported namespace bundle split algorithm {algorithm}")
        hashes: list[int] = []
        if algorithm == "topic_count_equally_divide":
            hashes = [topic_hash(t) for t in await self._svc.list_topics(namespace, mode="ALL")]

        async def write() -> None:
            def apply(doc: dict) -> dict:
                cur = boundaries_of(doc, self._svc.config.default_number_of_namespace_bundles)
                try:
                    if algorithm == "topic_count_equally_divide":
                        point = split_point(algorithm, nb.range.lower, nb.range.upper, hashes)
                        new = split_boundaries_at(cur, nb.range.name, point)
                    else:
                        new = split_boundaries(cur, nb.range.name, algorithm)
                except BundleError as exc:
                    raise errors.PreconditionFailedError(str(exc)) from None
                doc["bundles"] = {"boundaries": to_hex(new), "numBundles": len(new) - 1}
                return doc

            await self._res.namespaces.update(namespace, apply)

        await self._svc.namespace_service.split_bundle(nb, write)

    # ------------------------------------------------------------ generic policies
    async def _update(self, namespace: str, fn: Callable[[dict], None]) -> None:
        def apply(doc: dict) -> dict:
            fn(doc)
            return doc

        await self._res.namespaces.update(namespace, apply)
        await self._changed(namespace)

    def _cluster(self) -> str:
        return self._svc.config.cluster_name

    async def get_policy(self, namespace: str, spec: PolicySpec) -> Any:
        pol = await self._res.namespaces.require(namespace)
        value = pol.get(spec.ns_field)
        if spec.per_cluster:
            value = (value or {}).get(self._cluster())
        return value

    async def set_policy(self, namespace: str, spec: PolicySpec, raw: Any) -> None:
        value = parse_value(spec.kind, raw)
        await self._res.namespaces.require(namespace)
        if spec.name in ("replication", "allowedClusters"):
            await self._check_replication(namespace, value)

        def write(doc: dict) -> None:
            if spec.per_cluster:
                doc.setdefault(spec.ns_field, {})[self._cluster()] = value
            else:
                doc[spec.ns_field] = value
            if spec.name == "retention":
                retention_vs_quota(doc)

        await self._update(namespace, write)

    async def delete_policy(self, namespace: str, spec: PolicySpec) -> None:
        def clear(doc: dict) -> None:
            if spec.per_cluster:
                (doc.get(spec.ns_field) or {}).pop(self._cluster(), None)
            else:
                doc[spec.ns_field] = spec.ns_cleared

        await self._update(namespace, clear)

    async def _check_replication(self, namespace: str, clusters: list[str]) -> None:
        tenant = namespace.split("/", 1)[0]
        info = await self._res.tenants.require(tenant)
        known = set(await self._res.clusters.list())
        for c in clusters:
            if c not in known:
                raise errors.PreconditionFailedError(f"Invalid cluster id: {c}")
            if c not in info.get("allowedClusters", []):
                raise errors.PreconditionFailedError(f"Cluster {c} is not in the list of allowed clusters")

    # ------------------------------------------------------------ backlog quotas
    async def backlog_quota_map(self, namespace: str) -> dict:
        return dict((await self._res.namespaces.require(namespace)).get("backlog_quota_map") or {})

    async def set_backlog_quota(self, namespace: str, quota_type: str, raw: Any) -> None:
        qtype = parse_value(m.BacklogQuotaType, quota_type or "destination_storage")
        value = parse_value(m.BacklogQuota, raw)

        def write(doc: dict) -> None:
            doc.setdefault("backlog_quota_map", {})[qtype] = value
            retention_vs_quota(doc)

        await self._update(namespace, write)

    async def remove_backlog_quota(self, namespace: str, quota_type: str) -> None:
        qtype = parse_value(m.BacklogQuotaType, quota_type or "destination_storage")
        await self._update(namespace, lambda doc: (doc.get("backlog_quota_map") or {}).pop(qtype, None))

    # ------------------------------------------------------------ permissions
    async def permissions(self, namespace: str) -> dict:
        pol = await self._res.namespaces.require(namespace)
        return dict((pol.get("auth_policies") or {}).get("namespace_auth") or {})

    async def grant(self, namespace: str, role: str, raw: Any) -> None:
        if not isinstance(raw, list):
            from magnetar.broker.admin.policies import BadBodyError

            raise BadBodyError("expected a JSON list of actions")
        actions = sorted({parse_value(m.AuthAction, a) for a in raw})
        await self._update(
            namespace,
            lambda d: (
                d.setdefault("auth_policies", {}).setdefault("namespace_auth", {}).__setitem__(role, actions)
            ),
        )

    async def revoke(self, namespace: str, role: str) -> None:
        await self._update(
            namespace, lambda d: ((d.get("auth_policies") or {}).get("namespace_auth") or {}).pop(role, None)
        )

    async def subscription_permissions(self, namespace: str) -> dict:
        pol = await self._res.namespaces.require(namespace)
        return dict((pol.get("auth_policies") or {}).get("subscription_auth_roles") or {})

    async def grant_subscription(self, namespace: str, sub: str, roles: Any) -> None:
        value = parse_value("clusters", roles)  # a list of strings
        await self._update(
            namespace,
            lambda d: (
                d.setdefault("auth_policies", {})
                .setdefault("subscription_auth_roles", {})
                .__setitem__(sub, value)
            ),
        )

    async def revoke_subscription(self, namespace: str, sub: str, role: str) -> None:
        def write(d: dict) -> None:
            roles = ((d.get("auth_policies") or {}).get("subscription_auth_roles") or {}).get(sub)
            if roles and role in roles:
                roles.remove(role)

        await self._update(namespace, write)

    # ------------------------------------------------------------ properties / resource group
    async def properties(self, namespace: str) -> dict:
        return dict((await self._res.namespaces.require(namespace)).get("properties") or {})

    async def set_properties(self, namespace: str, raw: Any) -> None:
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            from magnetar.broker.admin.policies import BadBodyError

            raise BadBodyError("expected a JSON object of string values")
        await self._update(namespace, lambda d: d.setdefault("properties", {}).update(raw))

    async def set_property(self, namespace: str, key: str, value: str) -> None:
        await self._update(namespace, lambda d: d.setdefault("properties", {}).__setitem__(key, value))

    async def remove_property(self, namespace: str, key: str) -> None:
        await self._update(namespace, lambda d: (d.get("properties") or {}).pop(key, None))

    async def clear_properties(self, namespace: str) -> None:
        await self._update(namespace, lambda d: d.__setitem__("properties", {}))

    async def set_resource_group(self, namespace: str, name: str | None) -> None:
        if name is not None:  # 412 for a group that does not exist (broker.admin.resource_groups)
            from magnetar.broker.admin.resource_groups import ResourceGroupAdmin

            await ResourceGroupAdmin(self._svc).require(name)
        await self._update(namespace, lambda d: d.__setitem__("resource_group_name", name))


def spec_for_suffix(suffix: str) -> PolicySpec:
    spec = BY_NS_SUFFIX.get(suffix)
    if spec is None:
        raise errors.TopicNotFoundError(f"Unknown namespace policy {suffix!r}")
    return spec
