"""The admin surface's policy table: one row per namespace / topic policy, written once.

Theory of operation: Pulsar exposes ~40 policies with the same life cycle
(GET the value or 204 when unset, set with POST/PUT and a JSON body, DELETE
back to the default), but with historic naming differences -- between the
namespace REST suffix and the topic one (``maxProducersPerTopic`` vs
``maxProducers``), between the stored namespace document (``Policies``,
snake_case such as ``message_ttl_in_seconds``) and the topic document
(``TopicPolicies``, camelCase such as ``messageTTLInSeconds``), in the verb
(PUT for ``compactionThreshold`` on a namespace, POST on a topic) and in
whether a DELETE exists.  One :class:`AdminPolicy` per policy holds all of
these facts; every side of the admin API is built from :data:`POLICIES`:

* the broker (``broker.admin.policies``) adds the body *kind* it validates
  with and serves the REST routes (``web``);
* the admin client (``admin_client.policies``) generates its
  ``get_/set_/remove_<client>`` methods from the rows that have a
  ``client`` name (the message TTL is hand-written there: its topic form
  is a query parameter);
* the CLI (``cli.admin.policy_table``) names each command's policy by the
  client name.

A test (``tests/unit/admin_client/test_admin_surface_agrees.py``) checks
that the three accept the same names.  This module is plain data at the
bottom of the import layers: no I/O, no imports from the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A remove spec: True = DELETE on the same suffix, False = not removable, str = DELETE on that suffix.
Remove = bool | str


@dataclass(frozen=True)
class AdminPolicy:
    name: str  # the broker's name (Pulsar's camelCase), e.g. "maxUnackedMessagesOnConsumer"
    client: str | None  # admin_client method suffix (snake_case); None: hand-written there
    ns_suffix: str | None  # /admin/v2/namespaces/{t}/{ns}/<suffix>; None: no namespace level
    topic_suffix: str | None  # /admin/v2/{domain}/{t}/{ns}/{topic}/<suffix>; None: no topic level
    ns_field: str | None  # field in the stored namespace Policies document
    topic_field: str | None  # field in the stored TopicPolicies document
    ns_set: str = "POST"
    topic_set: str = "POST"
    per_cluster: bool = False  # stored per cluster in the namespace document: field[cluster]
    ns_cleared: Any = None  # the stored namespace value after DELETE / when unset
    ns_remove: Remove = True
    topic_remove: Remove = True
    doc: str = ""


_P = AdminPolicy

POLICIES: tuple[AdminPolicy, ...] = (
    _P(
        "retention",
        "retention",
        "retention",
        "retention",
        "retention_policies",
        "retentionPolicies",
        doc="RetentionPolicies (time in minutes, size in MB)",
    ),
    _P("messageTTL", None, "messageTTL", "messageTTL", "message_ttl_in_seconds", "messageTTLInSeconds"),
    _P(
        "deduplication",
        "deduplication",
        "deduplication",
        "deduplicationEnabled",
        "deduplicationEnabled",
        "deduplicationEnabled",
        doc="message deduplication on/off (bool)",
    ),
    _P(
        "deduplicationSnapshotInterval",
        "deduplication_snapshot_interval",
        "deduplicationSnapshotInterval",
        "deduplicationSnapshotInterval",
        "deduplicationSnapshotIntervalSeconds",
        "deduplicationSnapshotIntervalSeconds",
        doc="dedup snapshot interval in seconds (int)",
    ),
    _P(
        "schemaCompatibilityStrategy",
        "schema_compatibility_strategy",
        "schemaCompatibilityStrategy",
        "schemaCompatibilityStrategy",
        "schema_compatibility_strategy",
        "schemaCompatibilityStrategy",
        ns_set="PUT",
        topic_set="PUT",
        ns_cleared="UNDEFINED",
        ns_remove=False,
        doc="schema compatibility strategy (enum string)",
    ),
    _P(
        "schemaAutoUpdateCompatibilityStrategy",
        "schema_autoupdate_strategy",
        "schemaAutoUpdateCompatibilityStrategy",
        None,
        "schema_auto_update_compatibility_strategy",
        None,
        ns_set="PUT",
        ns_remove=False,
        doc="deprecated auto-update compatibility strategy",
    ),
    _P(
        "isAllowAutoUpdateSchema",
        "is_allow_auto_update_schema",
        "isAllowAutoUpdateSchema",
        None,
        "is_allow_auto_update_schema",
        None,
        ns_remove=False,
        doc="whether producers may register new schemas (bool)",
    ),
    _P(
        "schemaValidationEnforced",
        "schema_validation_enforced",
        "schemaValidationEnforced",
        "schemaValidationEnforced",
        "schema_validation_enforced",
        "schemaValidationEnforced",
        ns_cleared=False,
        ns_remove=False,
        doc="refuse producers without a schema (bool)",
    ),
    _P(
        "autoTopicCreation",
        "auto_topic_creation",
        "autoTopicCreation",
        None,
        "autoTopicCreationOverride",
        None,
        doc="AutoTopicCreationOverride",
    ),
    _P(
        "autoSubscriptionCreation",
        "auto_subscription_creation",
        "autoSubscriptionCreation",
        "autoSubscriptionCreation",
        "autoSubscriptionCreationOverride",
        "autoSubscriptionCreationOverride",
        doc="AutoSubscriptionCreationOverride",
    ),
    _P(
        "replication",
        "replication_clusters",
        "replication",
        "replication",
        "replication_clusters",
        "replicationClusters",
        ns_remove=False,
        doc="replication clusters (list)",
    ),
    _P(
        "allowedClusters",
        "allowed_clusters",
        "allowedClusters",
        None,
        "allowed_clusters",
        None,
        ns_cleared=[],
        ns_remove=False,
        doc="clusters the namespace may use (list)",
    ),
    _P(
        "persistence",
        "persistence",
        "persistence",
        "persistence",
        "persistence",
        "persistence",
        doc="PersistencePolicies (ensemble/quorums)",
    ),
    _P(
        "bookieAffinity",
        "bookie_affinity_group",
        "persistence/bookieAffinity",
        None,
        "bookieAffinityGroup",
        None,
        doc="BookieAffinityGroupData",
    ),
    _P(
        "offloadPolicies",
        "offload_policies",
        "offloadPolicies",
        "offloadPolicies",
        "offload_policies",
        "offloadPolicies",
        ns_remove="removeOffloadPolicies",
        doc="OffloadPolicies",
    ),
    _P(
        "offloadThreshold",
        "offload_threshold",
        "offloadThreshold",
        None,
        "offload_threshold",
        None,
        ns_set="PUT",
        ns_cleared=-1,
        ns_remove=False,
        doc="offload threshold in bytes (-1 disables)",
    ),
    _P(
        "offloadThresholdInSeconds",
        "offload_threshold_in_seconds",
        "offloadThresholdInSeconds",
        None,
        "offload_threshold_in_seconds",
        None,
        ns_set="PUT",
        ns_cleared=-1,
        ns_remove=False,
        doc="offload threshold in seconds",
    ),
    _P(
        "offloadDeletionLagMs",
        "offload_deletion_lag",
        "offloadDeletionLagMs",
        None,
        "offload_deletion_lag_ms",
        None,
        ns_set="PUT",
        doc="offload deletion lag in ms",
    ),
    _P(
        "compactionThreshold",
        "compaction_threshold",
        "compactionThreshold",
        "compactionThreshold",
        "compaction_threshold",
        "compactionThreshold",
        ns_set="PUT",
        doc="compaction threshold in bytes (0 disables)",
    ),
    _P(
        "dispatchRate",
        "dispatch_rate",
        "dispatchRate",
        "dispatchRate",
        "topicDispatchRate",
        "dispatchRate",
        per_cluster=True,
        doc="DispatchRate per topic",
    ),
    _P(
        "subscriptionDispatchRate",
        "subscription_dispatch_rate",
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        per_cluster=True,
        doc="DispatchRate per subscription",
    ),
    _P(
        "replicatorDispatchRate",
        "replicator_dispatch_rate",
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        per_cluster=True,
        doc="DispatchRate per replicator",
    ),
    _P(
        "publishRate",
        "publish_rate",
        "publishRate",
        "publishRate",
        "publishMaxMessageRate",
        "publishRate",
        per_cluster=True,
        doc="PublishRate per topic",
    ),
    _P(
        "subscribeRate",
        "subscribe_rate",
        "subscribeRate",
        "subscribeRate",
        "clusterSubscribeRate",
        "subscribeRate",
        per_cluster=True,
        doc="SubscribeRate per consumer",
    ),
    _P(
        "maxProducers",
        "max_producers",
        "maxProducersPerTopic",
        "maxProducers",
        "max_producers_per_topic",
        "maxProducerPerTopic",
        doc="max producers per topic (int)",
    ),
    _P(
        "maxConsumers",
        "max_consumers",
        "maxConsumersPerTopic",
        "maxConsumers",
        "max_consumers_per_topic",
        "maxConsumerPerTopic",
        doc="max consumers per topic (int)",
    ),
    _P(
        "maxConsumersPerSubscription",
        "max_consumers_per_subscription",
        "maxConsumersPerSubscription",
        "maxConsumersPerSubscription",
        "max_consumers_per_subscription",
        "maxConsumersPerSubscription",
        doc="max consumers per subscription (int)",
    ),
    _P(
        "maxUnackedMessagesOnConsumer",
        "max_unacked_messages_per_consumer",
        "maxUnackedMessagesPerConsumer",
        "maxUnackedMessagesOnConsumer",
        "max_unacked_messages_per_consumer",
        "maxUnackedMessagesOnConsumer",
        doc="max unacked messages per consumer (int)",
    ),
    _P(
        "maxUnackedMessagesOnSubscription",
        "max_unacked_messages_per_subscription",
        "maxUnackedMessagesPerSubscription",
        "maxUnackedMessagesOnSubscription",
        "max_unacked_messages_per_subscription",
        "maxUnackedMessagesOnSubscription",
        doc="max unacked messages per subscription (int)",
    ),
    _P(
        "maxSubscriptionsPerTopic",
        "max_subscriptions_per_topic",
        "maxSubscriptionsPerTopic",
        "maxSubscriptionsPerTopic",
        "max_subscriptions_per_topic",
        "maxSubscriptionsPerTopic",
        doc="max subscriptions per topic (int)",
    ),
    _P(
        "maxTopicsPerNamespace",
        "max_topics_per_namespace",
        "maxTopicsPerNamespace",
        None,
        "max_topics_per_namespace",
        None,
        doc="max topics in the namespace (int)",
    ),
    _P(
        "maxMessageSize",
        "max_message_size",
        None,
        "maxMessageSize",
        None,
        "maxMessageSize",
        doc="max message size in bytes (int)",
    ),
    _P(
        "subscriptionExpirationTime",
        "subscription_expiration_time",
        "subscriptionExpirationTime",
        None,
        "subscription_expiration_time_minutes",
        None,
        doc="inactive subscriptions expire after N minutes (int)",
    ),
    _P(
        "inactiveTopicPolicies",
        "inactive_topic_policies",
        "inactiveTopicPolicies",
        "inactiveTopicPolicies",
        "inactive_topic_policies",
        "inactiveTopicPolicies",
        doc="InactiveTopicPolicies",
    ),
    _P(
        "delayedDelivery",
        "delayed_delivery",
        "delayedDelivery",
        "delayedDelivery",
        "delayed_delivery_policies",
        "delayedDeliveryPolicies",
        doc="DelayedDeliveryPolicies",
    ),
    _P(
        "subscriptionTypesEnabled",
        "subscription_types_enabled",
        "subscriptionTypesEnabled",
        "subscriptionTypesEnabled",
        "subscription_types_enabled",
        "subscriptionTypesEnabled",
        ns_cleared=[],
        doc="enabled subscription types (list)",
    ),
    _P(
        "subscriptionAuthMode",
        "subscription_auth_mode",
        "subscriptionAuthMode",
        None,
        "subscription_auth_mode",
        None,
        ns_cleared="None",
        ns_remove=False,
        doc="None or Prefix",
    ),
    _P(
        "encryptionRequired",
        "encryption_required",
        "encryptionRequired",
        None,
        "encryption_required",
        None,
        ns_cleared=False,
        ns_remove=False,
        doc="require encrypted messages (bool)",
    ),
    _P(
        "antiAffinity",
        "anti_affinity_group",
        "antiAffinity",
        None,
        "antiAffinityGroup",
        None,
        doc="anti-affinity group (string)",
    ),
    _P(
        "entryFilters",
        "entry_filters",
        "entryFilters",
        "entryFilters",
        "entryFilters",
        "entryFilters",
        doc="EntryFilters",
    ),
)

BY_NAME: dict[str, AdminPolicy] = {p.name: p for p in POLICIES}
BY_CLIENT: dict[str, AdminPolicy] = {p.client: p for p in POLICIES if p.client}
