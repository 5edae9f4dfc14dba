"""Failure domains and namespace-isolation policies of a cluster (stored, as in Pulsar).

Theory of operation: both live in the metadata store under the cluster's node,
where Pulsar keeps them: one JSON document per failure domain at
``/admin/clusters/{cluster}/failureDomain/{domain}`` (``{"brokers": [...]}``)
and one map ``{policyName: NamespaceIsolationData}`` at
``/admin/clusters/{cluster}/namespaceIsolationPolicies``.  A broker belongs to
at most one failure domain (409 otherwise).  Nothing here changes placement
yet: the rack-aware bookie placement and the load manager do not read them
(single-broker standalone), which is why they are only stored.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from magnetar.broker import errors
from magnetar.broker.admin.policies import BadBodyError
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.service.api import BrokerServiceView
from magnetar.common.lazy_import import lazy_import

if TYPE_CHECKING:
    from magnetar.common.rest_models import FailureDomain, NamespaceIsolationData

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)

ROOT = "/admin/clusters"
NAME_CHARS_MAX = 256


class NotFoundError(errors.BrokerError):
    http_status = 404


def _check_name(kind: str, name: str) -> None:
    if not name or len(name) > NAME_CHARS_MAX or "/" in name:
        raise errors.PreconditionFailedError(f"{kind} name is not valid: {name!r}")


def _matches(regex: str, broker: str) -> bool:
    try:
        return re.fullmatch(regex, broker) is not None
    except re.error:
        return False  # stored as given; an invalid pattern matches nothing


class IsolationAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._res = svc.resources
        self._js = JsonStore(svc.resources.store)

    async def _cluster(self, cluster: str) -> None:
        if not await self._res.clusters.exists(cluster):
            raise errors.ClusterNotFoundError("Cluster does not exist")

    # ------------------------------------------------------------ failure domains
    def _domains_path(self, cluster: str) -> str:
        return f"{ROOT}/{cluster}/failureDomain"

    async def _domain_names(self, cluster: str) -> list[str]:
        # A missing node has no children ([]); a metadata error (lost session, timeout)
        # propagates and is answered as one -- never as "no domains".
        return sorted(await self._js.children(self._domains_path(cluster)))

    async def failure_domains(self, cluster: str) -> dict[str, dict]:
        await self._cluster(cluster)
        out: dict[str, dict] = {}
        for name in await self._domain_names(cluster):
            doc = await self._js.get(f"{self._domains_path(cluster)}/{name}")
            if doc is not None:
                out[name] = doc
        return out

    async def failure_domain(self, cluster: str, domain: str) -> dict:
        await self._cluster(cluster)
        doc = await self._js.get(f"{self._domains_path(cluster)}/{domain}")
        if doc is None:
            raise NotFoundError("Domain does not exist")
        return doc

    async def set_failure_domain(self, cluster: str, domain: str, data: FailureDomain) -> None:
        await self._cluster(cluster)
        _check_name("Domain", domain)
        mine = set(data.brokers)
        for name, doc in (await self.failure_domains(cluster)).items():
            if name != domain and mine & set(doc.get("brokers") or []):
                raise errors.AlreadyExistsError(
                    f"Domain {name} already has broker(s) {sorted(mine & set(doc['brokers']))}"
                )
        await self._js.put(f"{self._domains_path(cluster)}/{domain}", m.dump(data))

    async def delete_failure_domain(self, cluster: str, domain: str) -> None:
        await self._cluster(cluster)
        if not await self._js.delete(f"{self._domains_path(cluster)}/{domain}"):
            raise NotFoundError("Domain does not exist")

    # ------------------------------------------------------------ namespace isolation
    def _policies_path(self, cluster: str) -> str:
        return f"{ROOT}/{cluster}/namespaceIsolationPolicies"

    async def isolation_policies(self, cluster: str) -> dict[str, dict]:
        await self._cluster(cluster)
        return await self._js.get(self._policies_path(cluster)) or {}

    async def isolation_policy(self, cluster: str, policy: str) -> dict:
        doc = (await self.isolation_policies(cluster)).get(policy)
        if doc is None:
            raise NotFoundError(f"Policy {policy} does not exist")
        return doc

    async def set_isolation_policy(self, cluster: str, policy: str, data: NamespaceIsolationData) -> None:
        await self._cluster(cluster)
        _check_name("Policy", policy)
        if not data.namespaces or not data.primary:
            raise BadBodyError("namespaces and primary must not be empty")
        doc = m.dump(data)
        path = self._policies_path(cluster)
        if not await self._js.create(path, {policy: doc}):
            await self._js.update(path, lambda d: {**d, policy: doc})

    async def delete_isolation_policy(self, cluster: str, policy: str) -> None:
        await self._cluster(cluster)
        path = self._policies_path(cluster)
        if policy not in (await self._js.get(path) or {}):
            raise NotFoundError(f"Policy {policy} does not exist")
        await self._js.update(path, lambda d: {k: v for k, v in d.items() if k != policy})

    async def brokers_with_policies(self, cluster: str, active_brokers: list[str]) -> list[dict]:
        """Each active broker matched by a policy's primary or secondary regexes (Pulsar's
        BrokerNamespaceIsolationData)."""
        policies = await self.isolation_policies(cluster)
        out = []
        for broker in active_brokers:
            for name, doc in sorted(policies.items()):
                for primary, key in ((True, "primary"), (False, "secondary")):
                    if any(_matches(rx, broker) for rx in doc.get(key) or []):
                        out.append(
                            {
                                "brokerName": broker,
                                "policyName": name,
                                "namespaceRegex": list(doc.get("namespaces") or []),
                                "primary": primary,
                            }
                        )
                        break
        return out

    async def forget_cluster(self, cluster: str) -> None:
        """Before the cluster's node goes: its domains and policies go with it."""
        for name in await self._domain_names(cluster):
            await self._js.delete(f"{self._domains_path(cluster)}/{name}")
        await self._js.delete(self._domains_path(cluster))
        await self._js.delete(self._policies_path(cluster))
