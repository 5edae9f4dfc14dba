"""Topics: ``/admin/v2/persistent`` and ``/admin/v2/non-persistent`` -- lifecycle, stats, admin ops.

Theory of operation: a topic argument may be short (``my-topic`` ->
``persistent://public/default/my-topic``) or full; its domain picks the
``persistent`` / ``non-persistent`` path and its local name is percent-encoded
into one segment (``TopicName.rest_path``).  Subscription and message
operations live in :class:`~magnetar.admin_client.subscriptions.TopicSubscriptions`,
which :class:`Topics` extends.  Methods build calls only; the executor runs
them sync or async.  ``terminate`` returns a :class:`MessageId`;
everything else returns Pulsar's JSON (or None for 204).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from magnetar.admin_client.core import Expect, call, ns_path, seg, topic_name, topic_path
from magnetar.admin_client.subscriptions import TopicSubscriptions, message_id_of
from magnetar.common.naming import TopicDomain

if TYPE_CHECKING:
    from magnetar.admin_client.models import MessageId


class Topics(TopicSubscriptions):
    # ------------------------------------------------------------ listing
    def list(
        self,
        namespace: str,
        *,
        domain: TopicDomain | str = TopicDomain.PERSISTENT,
        bundle: str | None = None,
        include_system_topic: bool = False,
    ) -> Any:
        """Topics (and partitions) of one domain of the namespace."""
        path = f"/admin/v2/{TopicDomain(domain).value}/{ns_path(namespace)}"
        params = {"bundle": bundle, "includeSystemTopic": True if include_system_topic else None}
        return self._run(call("GET", path, params=params))

    def list_partitioned(
        self,
        namespace: str,
        *,
        domain: TopicDomain | str = TopicDomain.PERSISTENT,
        include_system_topic: bool = False,
    ) -> Any:
        path = f"/admin/v2/{TopicDomain(domain).value}/{ns_path(namespace)}/partitioned"
        params = {"includeSystemTopic": True if include_system_topic else None}
        return self._run(call("GET", path, params=params))

    # ------------------------------------------------------------ create / delete / partitions
    def create(self, topic: str, *, properties: Mapping[str, str] | None = None) -> Any:
        """Create a non-partitioned topic."""
        if properties:
            return self._run(call("PUT", topic_path(topic), body=dict(properties), expect=Expect.NONE))
        return self._run(call("PUT", topic_path(topic), expect=Expect.NONE))

    def create_partitioned(
        self, topic: str, partitions: int, *, properties: Mapping[str, str] | None = None
    ) -> Any:
        path = topic_path(topic) + "/partitions"
        if properties:
            body = {"partitions": int(partitions), "properties": dict(properties)}
            return self._run(
                call(
                    "PUT",
                    path,
                    content=_json_bytes(body),
                    content_type="application/vnd.partitioned-topic-metadata+json",
                    expect=Expect.NONE,
                )
            )
        return self._run(call("PUT", path, body=int(partitions), expect=Expect.NONE))

    def update_partitions(
        self, topic: str, partitions: int, *, update_local_only: bool = False, force: bool = False
    ) -> Any:
        params = {
            "updateLocalTopicOnly": True if update_local_only else None,
            "force": True if force else None,
        }
        path = topic_path(topic) + "/partitions"
        return self._run(call("POST", path, params=params, body=int(partitions), expect=Expect.NONE))

    def create_missed_partitions(self, topic: str) -> Any:
        return self._run(call("POST", topic_path(topic) + "/createMissedPartitions", expect=Expect.NONE))

    def get_partitioned_metadata(self, topic: str, *, check_allow_auto_creation: bool = False) -> Any:
        """``{"partitions": N}`` (0 = not partitioned)."""
        params = {"checkAllowAutoCreation": True if check_allow_auto_creation else None}
        return self._run(call("GET", topic_path(topic) + "/partitions", params=params))

    def delete_partitioned(self, topic: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", topic_path(topic) + "/partitions", params=params, expect=Expect.NONE))

    def delete(self, topic: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", topic_path(topic), params=params, expect=Expect.NONE))

    # ------------------------------------------------------------ properties and permissions
    def get_properties(self, topic: str) -> Any:
        return self._run(call("GET", topic_path(topic) + "/properties"))

    def update_properties(self, topic: str, properties: Mapping[str, str]) -> Any:
        path = topic_path(topic) + "/properties"
        return self._run(call("PUT", path, body=dict(properties), expect=Expect.NONE))

    def remove_property(self, topic: str, key: str) -> Any:
        path = topic_path(topic) + "/properties"
        return self._run(call("DELETE", path, params={"key": key}, expect=Expect.NONE))

    def get_permissions(self, topic: str) -> Any:
        return self._run(call("GET", topic_path(topic) + "/permissions"))

    def grant_permission(self, topic: str, role: str, actions: list[str]) -> Any:
        path = topic_path(topic) + f"/permissions/{seg(role)}"
        return self._run(call("POST", path, body=[str(a) for a in actions], expect=Expect.NONE))

    def revoke_permission(self, topic: str, role: str) -> Any:
        return self._run(call("DELETE", topic_path(topic) + f"/permissions/{seg(role)}", expect=Expect.NONE))

    # ------------------------------------------------------------ stats
    def get_stats(
        self,
        topic: str,
        *,
        get_precise_backlog: bool = False,
        subscription_backlog_size: bool = True,
        get_earliest_time_in_backlog: bool = False,
    ) -> Any:
        """TopicStats JSON (Pulsar's field names)."""
        params = {
            "getPreciseBacklog": get_precise_backlog,
            "subscriptionBacklogSize": subscription_backlog_size,
            "getEarliestTimeInBacklog": get_earliest_time_in_backlog,
        }
        return self._run(call("GET", topic_path(topic) + "/stats", params=params))

    def get_partitioned_stats(
        self,
        topic: str,
        *,
        per_partition: bool = False,
        get_precise_backlog: bool = False,
        subscription_backlog_size: bool = True,
        get_earliest_time_in_backlog: bool = False,
    ) -> Any:
        params = {
            "perPartition": per_partition,
            "getPreciseBacklog": get_precise_backlog,
            "subscriptionBacklogSize": subscription_backlog_size,
            "getEarliestTimeInBacklog": get_earliest_time_in_backlog,
        }
        return self._run(call("GET", topic_path(topic) + "/partitioned-stats", params=params))

    def get_internal_stats(self, topic: str, *, metadata: bool = False) -> Any:
        params = {"metadata": True} if metadata else None
        return self._run(call("GET", topic_path(topic) + "/internalStats", params=params))

    def get_partitioned_internal_stats(self, topic: str) -> Any:
        return self._run(call("GET", topic_path(topic) + "/partitioned-internalStats"))

    def get_internal_info(self, topic: str) -> Any:
        return self._run(call("GET", topic_path(topic) + "/internal-info"))

    # ------------------------------------------------------------ lifecycle operations
    def unload(self, topic: str) -> Any:
        return self._run(call("PUT", topic_path(topic) + "/unload", expect=Expect.NONE))

    def truncate(self, topic: str) -> Any:
        return self._run(call("DELETE", topic_path(topic) + "/truncate", expect=Expect.NONE))

    def trim(self, topic: str) -> Any:
        return self._run(call("POST", topic_path(topic) + "/trim", expect=Expect.NONE))

    def terminate(self, topic: str) -> Any:
        """Terminate; returns the :class:`MessageId` of the last message."""
        return self._run(call("POST", topic_path(topic) + "/terminate", transform=message_id_of))

    def terminate_partitioned(self, topic: str) -> Any:
        return self._run(call("POST", topic_path(topic) + "/terminate/partitions", expect=Expect.NONE))

    def trigger_compaction(self, topic: str) -> Any:
        return self._run(call("PUT", topic_path(topic) + "/compaction", expect=Expect.NONE))

    def compaction_status(self, topic: str) -> Any:
        """``{"status": "NOT_RUN"|"RUNNING"|"SUCCESS"|"ERROR", "lastError": ...}``."""
        return self._run(call("GET", topic_path(topic) + "/compaction"))

    def trigger_offload(self, topic: str, message_id: MessageId) -> Any:
        return self._run(call("PUT", topic_path(topic) + "/offload", body=message_id, expect=Expect.NONE))

    def offload_status(self, topic: str) -> Any:
        return self._run(call("GET", topic_path(topic) + "/offload"))

    # ------------------------------------------------------------ lookup
    def lookup(self, topic: str) -> Any:
        """LookupData ``{"brokerUrl": ..., "httpUrl": ...}`` (``GET /lookup/v2/topic/...``)."""
        return self._run(call("GET", "/lookup/v2/topic/" + topic_name(topic).lookup_name))

    def get_bundle_range(self, topic: str) -> Any:
        path = "/lookup/v2/topic/" + topic_name(topic).lookup_name + "/bundle"
        return self._run(call("GET", path, expect=Expect.TEXT))


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
