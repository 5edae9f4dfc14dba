"""Brokers and bookies: ``/admin/v2/brokers``, ``/admin/v2/broker-stats``, ``/admin/v2/bookies``.

Theory of operation: thin call builders like every resource family.  The
health check answers the text ``ok``; version answers a bare string; both are
returned as text.  Dynamic configuration values travel in the path
(``POST /brokers/configuration/{name}/{value}``) and are percent-encoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from magnetar.admin_client.core import Expect, Resource, call, seg

BASE = "/admin/v2/brokers"


class Brokers(Resource):
    def list(self, cluster: str | None = None) -> Any:
        """Active brokers (``host:port``) of ``cluster``, or of the local cluster when None."""
        return self._run(call("GET", f"{BASE}/{seg(cluster)}" if cluster else BASE))

    def get_leader_broker(self) -> Any:
        return self._run(call("GET", f"{BASE}/leaderBroker"))

    def get_owned_namespaces(self, cluster: str, broker: str) -> Any:
        return self._run(call("GET", f"{BASE}/{seg(cluster)}/{seg(broker)}/ownedNamespaces"))

    def get_dynamic_config_names(self) -> Any:
        return self._run(call("GET", f"{BASE}/configuration"))

    def get_all_dynamic_configurations(self) -> Any:
        return self._run(call("GET", f"{BASE}/configuration/values"))

    def get_runtime_configurations(self) -> Any:
        return self._run(call("GET", f"{BASE}/configuration/runtime"))

    def get_internal_configuration(self) -> Any:
        return self._run(call("GET", f"{BASE}/internal-configuration"))

    def update_dynamic_configuration(self, name: str, value: str) -> Any:
        path = f"{BASE}/configuration/{seg(name)}/{seg(value)}"
        return self._run(call("POST", path, expect=Expect.NONE))

    def delete_dynamic_configuration(self, name: str) -> Any:
        return self._run(call("DELETE", f"{BASE}/configuration/{seg(name)}", expect=Expect.NONE))

    def health_check(self, topic_version: str | None = None) -> Any:
        """``ok`` when the broker can produce and read back a message."""
        return self._run(
            call("GET", f"{BASE}/health", params={"topicVersion": topic_version}, expect=Expect.TEXT)
        )

    def ready(self) -> Any:
        return self._run(call("GET", f"{BASE}/ready", expect=Expect.TEXT))

    def version(self) -> Any:
        return self._run(call("GET", f"{BASE}/version", expect=Expect.TEXT))

    def backlog_quota_check(self) -> Any:
        return self._run(call("GET", f"{BASE}/backlog-quota-check", expect=Expect.NONE))

    def shutdown(
        self, *, max_concurrent_unload_per_sec: int | None = None, forced_terminate_topic: bool | None = None
    ) -> Any:
        """Graceful shutdown; unset parameters are left to the broker's defaults."""
        params = {
            "maxConcurrentUnloadPerSec": max_concurrent_unload_per_sec,
            "forcedTerminateTopic": forced_terminate_topic,
        }
        return self._run(call("POST", f"{BASE}/shutdown", params=params, expect=Expect.NONE))


class BrokerStats(Resource):
    BASE = "/admin/v2/broker-stats"

    def get_metrics(self) -> Any:
        return self._run(call("GET", f"{self.BASE}/metrics"))

    def get_mbeans(self) -> Any:
        return self._run(call("GET", f"{self.BASE}/mbeans"))

    def get_topics(self) -> Any:
        return self._run(call("GET", f"{self.BASE}/topics"))

    def get_load_report(self) -> Any:
        return self._run(call("GET", f"{self.BASE}/load-report"))

    def get_allocator_stats(self, allocator: str) -> Any:
        return self._run(call("GET", f"{self.BASE}/allocator-stats/{seg(allocator)}"))

    def get_load_decisions(self) -> Any:
        """Magnetar's: the load manager's leader flag, counters and recent decisions with reasons."""
        return self._run(call("GET", f"{self.BASE}/load-decisions"))


class Bookies(Resource):
    BASE = "/admin/v2/bookies"

    def list_bookies(self) -> Any:
        """``{"bookies": [{"bookieId": "host:3181"}, ...]}``."""
        return self._run(call("GET", f"{self.BASE}/all"))

    def get_racks_info(self) -> Any:
        return self._run(call("GET", f"{self.BASE}/racks-info"))

    def get_bookie_rack(self, bookie: str) -> Any:
        return self._run(call("GET", f"{self.BASE}/racks-info/{seg(bookie)}"))

    def set_bookie_rack(self, bookie: str, info: Mapping[str, Any], *, group: str = "default") -> Any:
        path = f"{self.BASE}/racks-info/{seg(bookie)}"
        return self._run(call("POST", path, params={"group": group}, body=dict(info), expect=Expect.NONE))

    def delete_bookie_rack(self, bookie: str) -> Any:
        return self._run(call("DELETE", f"{self.BASE}/racks-info/{seg(bookie)}", expect=Expect.NONE))
