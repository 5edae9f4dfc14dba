"""Topic-level policies: ``/admin/v2/{domain}/{t}/{ns}/{topic}/<suffix>`` (``pulsar-admin topicPolicies``).

Theory of operation: the same policy table as namespaces (``policies.POLICIES``)
with the topic API's suffixes (``maxProducers``, ``maxUnackedMessagesOnConsumer``,
``deduplicationEnabled`` ...).  Every getter takes ``applied`` (return the
effective value after topic -> namespace -> broker fallback) and
``is_global``; setters and removers take ``is_global`` (policy kept in the
replicated store).  Flags are only sent when true, so requests stay as plain
as ``pulsar-admin``'s.  The message TTL is the odd one: its setter sends the
value as the ``messageTTL`` query parameter with no body.  Getters return None
when the policy is not set at topic level (Pulsar's 204).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from magnetar.admin_client.core import Expect, Resource, call, topic_path
from magnetar.admin_client.policies import PolicySpec, install_policy_methods
from magnetar.common.rest_enums import BacklogQuotaType

if TYPE_CHECKING:  # the bodies (pydantic) are imported where one is built, not by this module
    from magnetar.admin_client.models import BacklogQuota


def _flags(applied: bool = False, is_global: bool = False) -> dict[str, Any]:
    return {"applied": True if applied else None, "isGlobal": True if is_global else None}


class TopicPolicies(Resource):
    def get_message_ttl(self, topic: str, *, applied: bool = False, is_global: bool = False) -> Any:
        return self._run(call("GET", topic_path(topic) + "/messageTTL", params=_flags(applied, is_global)))

    def set_message_ttl(self, topic: str, ttl_s: int, *, is_global: bool = False) -> Any:
        params = {"messageTTL": int(ttl_s), **_flags(False, is_global)}
        return self._run(call("POST", topic_path(topic) + "/messageTTL", params=params, expect=Expect.NONE))

    def remove_message_ttl(self, topic: str, *, is_global: bool = False) -> Any:
        path = topic_path(topic) + "/messageTTL"
        return self._run(call("DELETE", path, params=_flags(False, is_global), expect=Expect.NONE))

    def get_backlog_quotas(self, topic: str, *, applied: bool = False, is_global: bool = False) -> Any:
        path = topic_path(topic) + "/backlogQuotaMap"
        return self._run(call("GET", path, params=_flags(applied, is_global)))

    def set_backlog_quota(
        self,
        topic: str,
        quota: BacklogQuota | Mapping[str, Any],
        quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE,
        *,
        is_global: bool = False,
    ) -> Any:
        params = {"backlogQuotaType": str(quota_type), **_flags(False, is_global)}
        path = topic_path(topic) + "/backlogQuota"
        return self._run(call("POST", path, params=params, body=quota, expect=Expect.NONE))

    def remove_backlog_quota(
        self,
        topic: str,
        quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE,
        *,
        is_global: bool = False,
    ) -> Any:
        params = {"backlogQuotaType": str(quota_type), **_flags(False, is_global)}
        return self._run(
            call("DELETE", topic_path(topic) + "/backlogQuota", params=params, expect=Expect.NONE)
        )

    def set_dispatcher_pause_on_ack_state_persistent(self, topic: str, *, is_global: bool = False) -> Any:
        path = topic_path(topic) + "/dispatcherPauseOnAckStatePersistent"
        return self._run(call("POST", path, params=_flags(False, is_global), expect=Expect.NONE))

    def set_shadow_topics(self, topic: str, shadow_topics: list[str]) -> Any:
        return self._run(
            call("PUT", topic_path(topic) + "/shadowTopics", body=list(shadow_topics), expect=Expect.NONE)
        )


def _get(spec: PolicySpec, suffix: str) -> Callable[..., Any]:
    def get(self: TopicPolicies, topic: str, *, applied: bool = False, is_global: bool = False) -> Any:
        return self._run(call("GET", f"{topic_path(topic)}/{suffix}", params=_flags(applied, is_global)))

    return get


def _set(spec: PolicySpec, suffix: str, method: str) -> Callable[..., Any]:
    def set_(self: TopicPolicies, topic: str, value: Any, *, is_global: bool = False) -> Any:
        path = f"{topic_path(topic)}/{suffix}"
        return self._run(call(method, path, params=_flags(False, is_global), body=value, expect=Expect.NONE))

    return set_


def _remove(spec: PolicySpec, suffix: str) -> Callable[..., Any]:
    def remove(self: TopicPolicies, topic: str, *, is_global: bool = False) -> Any:
        path = f"{topic_path(topic)}/{suffix}"
        return self._run(call("DELETE", path, params=_flags(False, is_global), expect=Expect.NONE))

    return remove


install_policy_methods(TopicPolicies, "topic", _get, _set, _remove)
