"""``TopicPolicies``: the effective policies of one loaded topic, as one typed value.

Theory of operation: a topic's policies come from three places -- its own
override document (``/admin/topic-policies/...``), its namespace's Policies
and the broker configuration -- with Pulsar's precedence topic > namespace >
broker default.  The admin layer (``broker.admin.topic_policies``) resolves
them when a topic loads, on every policy write and periodically, and hands
the topic one frozen :class:`TopicPolicies`, which the topic stores with
:meth:`PersistentTopic.apply_policies` (one assignment: a reader sees the old
value or the new one, never half of each).  The hot path (PRODUCER,
SUBSCRIBE, SEND, dispatch) reads only this value -- no metadata I/O on a
connection and no dictionary of loose keys.

A topic that has not been resolved yet carries :data:`UNRESOLVED` (every
limit off), which is checked against the broker configuration only.

The storage path of a topic's override document lives here too, because the
service layer (automatic compaction) reads it; the admin layer writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from magnetar.broker.service.names import TopicRef, parse_topic

TOPIC_POLICIES_ROOT = "/admin/topic-policies"

# The resolved policy names (``broker.admin.policies`` spec names) a topic's admission reads.
ADMISSION_POLICIES = (
    "maxProducers",
    "maxConsumers",
    "maxConsumersPerSubscription",
    "subscriptionTypesEnabled",
    "maxUnackedMessagesOnConsumer",
    "publishRate",
    "dispatchRate",
    "subscriptionDispatchRate",
    "maxSubscriptionsPerTopic",
    "autoSubscriptionCreation",
    "delayedDelivery",
    "maxUnackedMessagesOnSubscription",
    "maxMessageSize",
    "encryptionRequired",
    "subscribeRate",
    "replicatorDispatchRate",
)

JsonObject = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TopicPolicies:
    """The effective policies the broker enforces on one topic (0 / None: no limit)."""

    resolved: bool = False
    max_producers: int = 0
    max_consumers: int = 0
    max_consumers_per_subscription: int = 0
    max_subscriptions_per_topic: int = 0
    subscription_types_enabled: tuple[str, ...] = ()
    max_unacked_messages_on_consumer: int | None = None
    max_unacked_messages_on_subscription: int | None = None
    max_message_size: int = 0
    encryption_required: bool = False
    publish_rate: JsonObject | None = None  # PublishRate JSON
    dispatch_rate: JsonObject | None = None  # DispatchRate JSON (per topic)
    subscription_dispatch_rate: JsonObject | None = None  # DispatchRate JSON (per subscription)
    subscribe_rate: JsonObject | None = None  # SubscribeRate JSON
    replicator_dispatch_rate: JsonObject | None = None  # DispatchRate JSON (per replicator)
    auto_subscription_creation: JsonObject | None = None  # AutoSubscriptionCreationOverride JSON
    delayed_delivery: JsonObject | None = None  # DelayedDeliveryPolicies JSON
    backlog_quota: JsonObject | None = None  # the ``destination_storage`` BacklogQuota
    backlog_quota_age: JsonObject | None = None  # the ``message_age`` BacklogQuota
    topic_document: JsonObject | None = None  # the topic's own overrides (TopicPolicies JSON)

    @classmethod
    def from_resolved(
        cls,
        values: Mapping[str, Any],
        *,
        topic_document: JsonObject | None,
        backlog_quota: JsonObject | None = None,
        backlog_quota_age: JsonObject | None = None,
    ) -> TopicPolicies:
        """From resolved values keyed by policy name (:data:`ADMISSION_POLICIES`)."""
        g = values.get
        unacked_c = g("maxUnackedMessagesOnConsumer")
        unacked_s = g("maxUnackedMessagesOnSubscription")
        return _shared(
            cls(
                resolved=True,
                max_producers=int(g("maxProducers") or 0),
                max_consumers=int(g("maxConsumers") or 0),
                max_consumers_per_subscription=int(g("maxConsumersPerSubscription") or 0),
                max_subscriptions_per_topic=int(g("maxSubscriptionsPerTopic") or 0),
                subscription_types_enabled=tuple(g("subscriptionTypesEnabled") or ()),
                max_unacked_messages_on_consumer=None if unacked_c is None else int(unacked_c),
                max_unacked_messages_on_subscription=None if unacked_s is None else int(unacked_s),
                max_message_size=int(g("maxMessageSize") or 0),
                encryption_required=bool(g("encryptionRequired")),
                publish_rate=g("publishRate"),
                dispatch_rate=g("dispatchRate"),
                subscription_dispatch_rate=g("subscriptionDispatchRate"),
                subscribe_rate=g("subscribeRate"),
                replicator_dispatch_rate=g("replicatorDispatchRate"),
                auto_subscription_creation=g("autoSubscriptionCreation"),
                delayed_delivery=g("delayedDelivery"),
                backlog_quota=backlog_quota,
                backlog_quota_age=backlog_quota_age,
                topic_document=topic_document or None,
            )
        )


UNRESOLVED = TopicPolicies()
_SHARED: dict[TopicPolicies, TopicPolicies] = {}


def _shared(p: TopicPolicies) -> TopicPolicies:
    """One instance per distinct policies without JSON documents (frozen): most topics have
    none, and then ten thousand topics hold one TopicPolicies instead of ten thousand."""
    try:
        got = _SHARED.get(p)
    except TypeError:  # holds a JSON document (a dict): kept per topic
        return p
    if got is None:
        if len(_SHARED) >= 1024:
            _SHARED.clear()
        got = _SHARED[p] = p
    return got


def base_ref(ref: TopicRef) -> TopicRef:
    """A partition's policies are its partitioned topic's."""
    return parse_topic(ref.name.partitioned_topic_name) if ref.is_partition else ref


def topic_policies_path(ref: TopicRef) -> str:
    b = base_ref(ref)
    return f"{TOPIC_POLICIES_ROOT}/{b.tenant}/{b.namespace_portion}/{b.domain}/{quote(b.local_name, safe='')}"
