"""The policy table: every namespace and topic-level policy the admin API knows.

Theory of operation: Pulsar's policy endpoints share one shape (GET the value
or 204 when unset, set with POST/PUT and a JSON body, DELETE to fall back to
the broker default), but their suffixes and verbs differ between the
namespace API (``/admin/v2/namespaces/{t}/{ns}/<suffix>``) and the
topic-level API (``/admin/v2/persistent/{t}/{ns}/{topic}/<suffix>``), e.g.
``maxUnackedMessagesPerConsumer`` vs ``maxUnackedMessagesOnConsumer``, or PUT
for ``compactionThreshold`` on a namespace but POST on a topic.  This module
writes those facts down once, as :data:`POLICIES`, keyed by a snake_case name.

:func:`install_policy_methods` turns the table into ``get_<name>`` /
``set_<name>`` / ``remove_<name>`` methods on a resource class, so
``admin.namespaces.set_retention(ns, RetentionPolicies(...))`` and
``admin.topic_policies.get_retention(topic, applied=True)`` exist without
hundreds of hand-written three-line methods; the CLI builds its
``set-retention`` / ``get-retention`` / ``remove-retention`` commands from the
same table.  Policies whose shape is not the common one (backlog quotas with
their type parameter, the topic message TTL sent as a query parameter,
namespace properties, resource groups) have hand-written methods instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A remove spec: True = DELETE on the same suffix, False = not removable, str = DELETE on that suffix.
Remove = bool | str


@dataclass(frozen=True)
class PolicySpec:
    name: str  # snake_case, e.g. "max_unacked_messages_per_consumer"
    ns_suffix: str | None  # None: no namespace-level endpoint
    topic_suffix: str | None  # None: no topic-level endpoint
    ns_set: str = "POST"
    topic_set: str = "POST"
    ns_remove: Remove = True
    topic_remove: Remove = True
    doc: str = ""


def _p(name: str, ns: str | None, topic: str | None, doc: str, **kw: Any) -> PolicySpec:
    return PolicySpec(name, ns, topic, doc=doc, **kw)


POLICIES: dict[str, PolicySpec] = {
    s.name: s
    for s in (
        _p("retention", "retention", "retention", "RetentionPolicies (time in minutes, size in MB)"),
        _p("deduplication", "deduplication", "deduplicationEnabled", "message deduplication on/off (bool)"),
        _p(
            "deduplication_snapshot_interval",
            "deduplicationSnapshotInterval",
            "deduplicationSnapshotInterval",
            "dedup snapshot interval in seconds (int)",
        ),
        _p(
            "schema_compatibility_strategy",
            "schemaCompatibilityStrategy",
            "schemaCompatibilityStrategy",
            "schema compatibility strategy (enum string)",
            ns_set="PUT",
            topic_set="PUT",
            ns_remove=False,
        ),
        _p(
            "schema_autoupdate_strategy",
            "schemaAutoUpdateCompatibilityStrategy",
            None,
            "deprecated auto-update compatibility strategy",
            ns_set="PUT",
            ns_remove=False,
        ),
        _p(
            "is_allow_auto_update_schema",
            "isAllowAutoUpdateSchema",
            None,
            "whether producers may register new schemas (bool)",
            ns_remove=False,
        ),
        _p(
            "schema_validation_enforced",
            "schemaValidationEnforced",
            "schemaValidationEnforced",
            "refuse producers without a schema (bool)",
            ns_remove=False,
        ),
        _p("auto_topic_creation", "autoTopicCreation", None, "AutoTopicCreationOverride"),
        _p(
            "auto_subscription_creation",
            "autoSubscriptionCreation",
            "autoSubscriptionCreation",
            "AutoSubscriptionCreationOverride",
        ),
        _p(
            "replication_clusters",
            "replication",
            "replication",
            "replication clusters (list)",
            ns_remove=False,
        ),
        _p(
            "allowed_clusters",
            "allowedClusters",
            None,
            "clusters the namespace may use (list)",
            ns_remove=False,
        ),
        _p("persistence", "persistence", "persistence", "PersistencePolicies (ensemble/quorums)"),
        _p("bookie_affinity_group", "persistence/bookieAffinity", None, "BookieAffinityGroupData"),
        _p(
            "offload_policies",
            "offloadPolicies",
            "offloadPolicies",
            "OffloadPolicies",
            ns_remove="removeOffloadPolicies",
        ),
        _p(
            "offload_threshold",
            "offloadThreshold",
            None,
            "offload threshold in bytes (-1 disables)",
            ns_set="PUT",
            ns_remove=False,
        ),
        _p(
            "offload_threshold_in_seconds",
            "offloadThresholdInSeconds",
            None,
            "offload threshold in seconds",
            ns_set="PUT",
            ns_remove=False,
        ),
        _p("offload_deletion_lag", "offloadDeletionLagMs", None, "offload deletion lag in ms", ns_set="PUT"),
        _p(
            "compaction_threshold",
            "compactionThreshold",
            "compactionThreshold",
            "compaction threshold in bytes (0 disables)",
            ns_set="PUT",
        ),
        _p("dispatch_rate", "dispatchRate", "dispatchRate", "DispatchRate per topic"),
        _p(
            "subscription_dispatch_rate",
            "subscriptionDispatchRate",
            "subscriptionDispatchRate",
            "DispatchRate per subscription",
        ),
        _p(
            "replicator_dispatch_rate",
            "replicatorDispatchRate",
            "replicatorDispatchRate",
            "DispatchRate per replicator",
        ),
        _p("publish_rate", "publishRate", "publishRate", "PublishRate per topic"),
        _p("subscribe_rate", "subscribeRate", "subscribeRate", "SubscribeRate per consumer"),
        _p("max_producers", "maxProducersPerTopic", "maxProducers", "max producers per topic (int)"),
        _p("max_consumers", "maxConsumersPerTopic", "maxConsumers", "max consumers per topic (int)"),
        _p(
            "max_consumers_per_subscription",
            "maxConsumersPerSubscription",
            "maxConsumersPerSubscription",
            "max consumers per subscription (int)",
        ),
        _p(
            "max_unacked_messages_per_consumer",
            "maxUnackedMessagesPerConsumer",
            "maxUnackedMessagesOnConsumer",
            "max unacked messages per consumer (int)",
        ),
        _p(
            "max_unacked_messages_per_subscription",
            "maxUnackedMessagesPerSubscription",
            "maxUnackedMessagesOnSubscription",
            "max unacked messages per subscription (int)",
        ),
        _p(
            "max_subscriptions_per_topic",
            "maxSubscriptionsPerTopic",
            "maxSubscriptionsPerTopic",
            "max subscriptions per topic (int)",
        ),
        _p("max_topics_per_namespace", "maxTopicsPerNamespace", None, "max topics in the namespace (int)"),
        _p("max_message_size", None, "maxMessageSize", "max message size in bytes (int)"),
        _p(
            "subscription_expiration_time",
            "subscriptionExpirationTime",
            None,
            "inactive subscriptions expire after N minutes (int)",
        ),
        _p(
            "inactive_topic_policies",
            "inactiveTopicPolicies",
            "inactiveTopicPolicies",
            "InactiveTopicPolicies",
        ),
        _p("delayed_delivery", "delayedDelivery", "delayedDelivery", "DelayedDeliveryPolicies"),
        _p(
            "subscription_types_enabled",
            "subscriptionTypesEnabled",
            "subscriptionTypesEnabled",
            "enabled subscription types (list)",
        ),
        _p("subscription_auth_mode", "subscriptionAuthMode", None, "None or Prefix", ns_remove=False),
        _p(
            "encryption_required",
            "encryptionRequired",
            None,
            "require encrypted messages (bool)",
            ns_remove=False,
        ),
        _p("anti_affinity_group", "antiAffinity", None, "anti-affinity group (string)"),
        _p("entry_filters", "entryFilters", "entryFilters", "EntryFilters"),
    )
}


def install_policy_methods(
    cls: type,
    level: str,
    make_get: Callable[[PolicySpec, str], Callable[..., Any]],
    make_set: Callable[[PolicySpec, str, str], Callable[..., Any]],
    make_remove: Callable[[PolicySpec, str], Callable[..., Any]],
) -> None:
    """Add get_/set_/remove_<name> methods for every policy the ``level`` ("ns"/"topic") has."""
    for spec in POLICIES.values():
        suffix = spec.ns_suffix if level == "ns" else spec.topic_suffix
        if suffix is None:
            continue
        method = spec.ns_set if level == "ns" else spec.topic_set
        remove = spec.ns_remove if level == "ns" else spec.topic_remove
        for prefix, fn in (("get_", make_get(spec, suffix)), ("set_", make_set(spec, suffix, method))):
            name = prefix + spec.name
            if name not in cls.__dict__:  # a hand-written method wins
                fn.__name__ = fn.__qualname__ = name
                fn.__doc__ = f"{prefix[:-1].capitalize()} {spec.doc} ({method if prefix == 'set_' else 'GET'} {suffix})."
                setattr(cls, name, fn)
        if remove:
            remove_suffix = remove if isinstance(remove, str) else suffix
            name = "remove_" + spec.name
            if name not in cls.__dict__:
                fn = make_remove(spec, remove_suffix)
                fn.__name__ = fn.__qualname__ = name
                fn.__doc__ = f"Remove {spec.doc} (DELETE {remove_suffix})."
                setattr(cls, name, fn)
