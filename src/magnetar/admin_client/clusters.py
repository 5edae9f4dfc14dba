"""Clusters: ``/admin/v2/clusters`` (cluster data, peers, failure domains, isolation policies).

Theory of operation: each method builds one :class:`~magnetar.admin_client.core.Call`
and hands it to the executor (sync or async, see ``core``); getters return
Pulsar's JSON, setters return None.  Cluster create/update answer 200 with an
empty body in Pulsar, which decodes to None like a 204.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from magnetar.admin_client.core import Expect, Resource, call, seg

if TYPE_CHECKING:  # the bodies (pydantic) are imported where one is built, not by this module
    from magnetar.admin_client.models import ClusterData

BASE = "/admin/v2/clusters"

ClusterBody: TypeAlias = "ClusterData | Mapping[str, Any]"


class Clusters(Resource):
    def list(self) -> Any:
        """Names of all clusters (``GET /admin/v2/clusters``)."""
        return self._run(call("GET", BASE))

    def get(self, cluster: str) -> Any:
        """ClusterData JSON of one cluster."""
        return self._run(call("GET", f"{BASE}/{seg(cluster)}"))

    def create(self, cluster: str, data: ClusterBody) -> Any:
        return self._run(call("PUT", f"{BASE}/{seg(cluster)}", body=data, expect=Expect.NONE))

    def update(self, cluster: str, data: ClusterBody) -> Any:
        return self._run(call("POST", f"{BASE}/{seg(cluster)}", body=data, expect=Expect.NONE))

    def delete(self, cluster: str) -> Any:
        return self._run(call("DELETE", f"{BASE}/{seg(cluster)}", expect=Expect.NONE))

    def get_peer_clusters(self, cluster: str) -> Any:
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/peers"))

    def update_peer_clusters(self, cluster: str, peers: list[str]) -> Any:
        return self._run(call("POST", f"{BASE}/{seg(cluster)}/peers", body=list(peers), expect=Expect.NONE))

    def list_failure_domains(self, cluster: str) -> Any:
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/failureDomains"))

    def get_failure_domain(self, cluster: str, domain: str) -> Any:
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/failureDomains/{seg(domain)}"))

    def set_failure_domain(self, cluster: str, domain: str, brokers: list[str]) -> Any:
        """Create or update a failure domain (``{"brokers": [...]}``)."""
        path = f"{BASE}/{seg(cluster)}/failureDomains/{seg(domain)}"
        return self._run(call("POST", path, body={"brokers": list(brokers)}, expect=Expect.NONE))

    def delete_failure_domain(self, cluster: str, domain: str) -> Any:
        path = f"{BASE}/{seg(cluster)}/failureDomains/{seg(domain)}"
        return self._run(call("DELETE", path, expect=Expect.NONE))

    def list_namespace_isolation_policies(self, cluster: str) -> Any:
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/namespaceIsolationPolicies"))

    def get_namespace_isolation_policy(self, cluster: str, policy: str) -> Any:
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/namespaceIsolationPolicies/{seg(policy)}"))

    def set_namespace_isolation_policy(self, cluster: str, policy: str, data: Mapping[str, Any]) -> Any:
        path = f"{BASE}/{seg(cluster)}/namespaceIsolationPolicies/{seg(policy)}"
        return self._run(call("POST", path, body=data, expect=Expect.NONE))

    def delete_namespace_isolation_policy(self, cluster: str, policy: str) -> Any:
        path = f"{BASE}/{seg(cluster)}/namespaceIsolationPolicies/{seg(policy)}"
        return self._run(call("DELETE", path, expect=Expect.NONE))

    def get_brokers_with_namespace_isolation_policy(self, cluster: str) -> Any:
        """``[{"brokerName", "policyName", "namespaceRegex", "primary"}, ...]``."""
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/namespaceIsolationPolicies/brokers"))

    def get_broker_with_namespace_isolation_policy(self, cluster: str, broker: str) -> Any:
        path = f"{BASE}/{seg(cluster)}/namespaceIsolationPolicies/brokers/{seg(broker)}"
        return self._run(call("GET", path))
