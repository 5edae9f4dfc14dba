"""The policy table: every namespace / topic policy, its REST suffixes and stored fields.

Theory of operation: Pulsar exposes ~40 policies with the same life cycle
(GET value or 204 when unset, set, DELETE back to the default) but with
historic naming differences between the namespace document (``Policies``,
snake_case such as ``message_ttl_in_seconds``) and the topic document
(``TopicPolicies``, camelCase such as ``messageTTLInSeconds``) and between
the namespace and topic REST suffixes (``maxProducersPerTopic`` vs
``maxProducers``).  One :class:`PolicySpec` per policy holds all of these,
plus the body *kind* used to validate a value.  ``parse_value`` turns a raw
request body into the stored JSON value or raises 400 (malformed) / 412
(out-of-range scalar), as Pulsar does.  Policies Pulsar stores per cluster
inside the namespace document (dispatch/publish/subscribe rates) are marked
``per_cluster``: the value lives at ``field[cluster]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel, ValidationError

from magnetar.broker import errors
from magnetar.broker.admin import models as m

INT = "int"  # non-negative int32
LONG = "long"  # any int64 (negative values mean "disabled" for offload thresholds)
BOOL = "bool"
CLUSTERS = "clusters"
SUBTYPES = "subtypes"
STRING = "string"

BODY_BYTES_MAX = 256 * 1024


class BadBodyError(errors.BrokerError):
    """A malformed request body (HTTP 400)."""

    http_status = 400


@dataclass(frozen=True)
class PolicySpec:
    name: str
    kind: Any  # INT/LONG/BOOL/CLUSTERS/SUBTYPES/STRING, an Enum class or a pydantic model
    ns_suffix: str | None
    ns_field: str | None
    topic_suffix: str | None
    topic_field: str | None
    ns_set: str = "POST"
    topic_set: str = "POST"
    per_cluster: bool = False
    ns_cleared: Any = None  # the stored value after DELETE / when unset


SPECS: tuple[PolicySpec, ...] = (
    PolicySpec(
        "retention", m.RetentionPolicies, "retention", "retention_policies", "retention", "retentionPolicies"
    ),
    PolicySpec(
        "messageTTL", INT, "messageTTL", "message_ttl_in_seconds", "messageTTL", "messageTTLInSeconds"
    ),
    PolicySpec(
        "deduplication",
        BOOL,
        "deduplication",
        "deduplicationEnabled",
        "deduplicationEnabled",
        "deduplicationEnabled",
    ),
    PolicySpec(
        "deduplicationSnapshotInterval",
        INT,
        "deduplicationSnapshotInterval",
        "deduplicationSnapshotIntervalSeconds",
        "deduplicationSnapshotInterval",
        "deduplicationSnapshotIntervalSeconds",
    ),
    PolicySpec(
        "schemaCompatibilityStrategy",
        m.SchemaCompatibilityStrategy,
        "schemaCompatibilityStrategy",
        "schema_compatibility_strategy",
        "schemaCompatibilityStrategy",
        "schemaCompatibilityStrategy",
        ns_set="PUT",
        topic_set="PUT",
        ns_cleared="UNDEFINED",
    ),
    PolicySpec(
        "schemaAutoUpdateCompatibilityStrategy",
        m.SchemaAutoUpdateCompatibilityStrategy,
        "schemaAutoUpdateCompatibilityStrategy",
        "schema_auto_update_compatibility_strategy",
        None,
        None,
        ns_set="PUT",
    ),
    PolicySpec(
        "isAllowAutoUpdateSchema", BOOL, "isAllowAutoUpdateSchema", "is_allow_auto_update_schema", None, None
    ),
    PolicySpec(
        "schemaValidationEnforced",
        BOOL,
        "schemaValidationEnforced",
        "schema_validation_enforced",
        "schemaValidationEnforced",
        "schemaValidationEnforced",
        ns_cleared=False,
    ),
    PolicySpec(
        "autoTopicCreation",
        m.AutoTopicCreationOverride,
        "autoTopicCreation",
        "autoTopicCreationOverride",
        None,
        None,
    ),
    PolicySpec(
        "autoSubscriptionCreation",
        m.AutoSubscriptionCreationOverride,
        "autoSubscriptionCreation",
        "autoSubscriptionCreationOverride",
        "autoSubscriptionCreation",
        "autoSubscriptionCreationOverride",
    ),
    PolicySpec(
        "replication", CLUSTERS, "replication", "replication_clusters", "replication", "replicationClusters"
    ),
    PolicySpec("allowedClusters", CLUSTERS, "allowedClusters", "allowed_clusters", None, None, ns_cleared=[]),
    PolicySpec(
        "persistence", m.PersistencePolicies, "persistence", "persistence", "persistence", "persistence"
    ),
    PolicySpec(
        "bookieAffinity",
        m.BookieAffinityGroupData,
        "persistence/bookieAffinity",
        "bookieAffinityGroup",
        None,
        None,
    ),
    PolicySpec(
        "offloadPolicies",
        m.OffloadPolicies,
        "offloadPolicies",
        "offload_policies",
        "offloadPolicies",
        "offloadPolicies",
    ),
    PolicySpec(
        "offloadThreshold",
        LONG,
        "offloadThreshold",
        "offload_threshold",
        None,
        None,
        ns_set="PUT",
        ns_cleared=-1,
    ),
    PolicySpec(
        "offloadThresholdInSeconds",
        LONG,
        "offloadThresholdInSeconds",
        "offload_threshold_in_seconds",
        None,
        None,
        ns_set="PUT",
        ns_cleared=-1,
    ),
    PolicySpec(
        "offloadDeletionLagMs",
        LONG,
        "offloadDeletionLagMs",
        "offload_deletion_lag_ms",
        None,
        None,
        ns_set="PUT",
    ),
    PolicySpec(
        "compactionThreshold",
        LONG,
        "compactionThreshold",
        "compaction_threshold",
        "compactionThreshold",
        "compactionThreshold",
        ns_set="PUT",
    ),
    PolicySpec(
        "dispatchRate",
        m.DispatchRate,
        "dispatchRate",
        "topicDispatchRate",
        "dispatchRate",
        "dispatchRate",
        per_cluster=True,
    ),
    PolicySpec(
        "subscriptionDispatchRate",
        m.DispatchRate,
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        per_cluster=True,
    ),
    PolicySpec(
        "replicatorDispatchRate",
        m.DispatchRate,
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        per_cluster=True,
    ),
    PolicySpec(
        "publishRate",
        m.PublishRate,
        "publishRate",
        "publishMaxMessageRate",
        "publishRate",
        "publishRate",
        per_cluster=True,
    ),
    PolicySpec(
        "subscribeRate",
        m.SubscribeRate,
        "subscribeRate",
        "clusterSubscribeRate",
        "subscribeRate",
        "subscribeRate",
        per_cluster=True,
    ),
    PolicySpec(
        "maxProducers",
        INT,
        "maxProducersPerTopic",
        "max_producers_per_topic",
        "maxProducers",
        "maxProducerPerTopic",
    ),
    PolicySpec(
        "maxConsumers",
        INT,
        "maxConsumersPerTopic",
        "max_consumers_per_topic",
        "maxConsumers",
        "maxConsumerPerTopic",
    ),
    PolicySpec(
        "maxConsumersPerSubscription",
        INT,
        "maxConsumersPerSubscription",
        "max_consumers_per_subscription",
        "maxConsumersPerSubscription",
        "maxConsumersPerSubscription",
    ),
    PolicySpec(
        "maxUnackedMessagesOnConsumer",
        INT,
        "maxUnackedMessagesPerConsumer",
        "max_unacked_messages_per_consumer",
        "maxUnackedMessagesOnConsumer",
        "maxUnackedMessagesOnConsumer",
    ),
    PolicySpec(
        "maxUnackedMessagesOnSubscription",
        INT,
        "maxUnackedMessagesPerSubscription",
        "max_unacked_messages_per_subscription",
        "maxUnackedMessagesOnSubscription",
        "maxUnackedMessagesOnSubscription",
    ),
    PolicySpec(
        "maxSubscriptionsPerTopic",
        INT,
        "maxSubscriptionsPerTopic",
        "max_subscriptions_per_topic",
        "maxSubscriptionsPerTopic",
        "maxSubscriptionsPerTopic",
    ),
    PolicySpec("maxTopicsPerNamespace", INT, "maxTopicsPerNamespace", "max_topics_per_namespace", None, None),
    PolicySpec("maxMessageSize", INT, None, None, "maxMessageSize", "maxMessageSize"),
    PolicySpec(
        "subscriptionExpirationTime",
        INT,
        "subscriptionExpirationTime",
        "subscription_expiration_time_minutes",
        None,
        None,
    ),
    PolicySpec(
        "inactiveTopicPolicies",
        m.InactiveTopicPolicies,
        "inactiveTopicPolicies",
        "inactive_topic_policies",
        "inactiveTopicPolicies",
        "inactiveTopicPolicies",
    ),
    PolicySpec(
        "delayedDelivery",
        m.DelayedDeliveryPolicies,
        "delayedDelivery",
        "delayed_delivery_policies",
        "delayedDelivery",
        "delayedDeliveryPolicies",
    ),
    PolicySpec(
        "subscriptionTypesEnabled",
        SUBTYPES,
        "subscriptionTypesEnabled",
        "subscription_types_enabled",
        "subscriptionTypesEnabled",
        "subscriptionTypesEnabled",
        ns_cleared=[],
    ),
    PolicySpec(
        "subscriptionAuthMode",
        m.SubscriptionAuthMode,
        "subscriptionAuthMode",
        "subscription_auth_mode",
        None,
        None,
        ns_cleared="None",
    ),
    PolicySpec(
        "encryptionRequired", BOOL, "encryptionRequired", "encryption_required", None, None, ns_cleared=False
    ),
    PolicySpec("antiAffinity", STRING, "antiAffinity", "antiAffinityGroup", None, None),
    PolicySpec(
        "entryFilters", m.EntryFilters, "entryFilters", "entryFilters", "entryFilters", "entryFilters"
    ),
)

BY_NS_SUFFIX = {s.ns_suffix: s for s in SPECS if s.ns_suffix}
BY_TOPIC_SUFFIX = {s.topic_suffix: s for s in SPECS if s.topic_suffix}
BY_NAME = {s.name: s for s in SPECS}


def load_json(body: bytes, *, allow_bare_string: bool = False) -> Any:
    if len(body) > BODY_BYTES_MAX:
        raise BadBodyError("request body too large")
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        raise BadBodyError("request body is required")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if allow_bare_string:
            return text
        raise BadBodyError("request body is not valid JSON") from None


def parse_value(kind: Any, raw: Any) -> Any:
    """Validate a decoded JSON body against a policy kind; the JSON value to store."""
    if kind in (INT, LONG):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise BadBodyError("expected an integer body")
        if not -(2**63) <= raw < 2**63:
            raise BadBodyError("integer out of range")
        if kind == INT and (raw < 0 or raw > m.INT32_MAX):
            raise errors.PreconditionFailedError("Invalid value: must be a non-negative 32-bit integer")
        return raw
    if kind == BOOL:
        if not isinstance(raw, bool):
            raise BadBodyError("expected a boolean body")
        return raw
    if kind == STRING:
        if not isinstance(raw, str) or not raw.strip():
            raise errors.PreconditionFailedError("Invalid value: expected a non-empty string")
        return raw.strip()
    if kind in (CLUSTERS, SUBTYPES):
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise BadBodyError("expected a JSON list of strings")
        if kind == SUBTYPES:
            try:
                return sorted({m.SubscriptionType(x).value for x in raw})
            except ValueError:
                raise BadBodyError(f"invalid subscription type in {raw}") from None
        return sorted(set(raw))
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(raw).value
        except ValueError:
            raise BadBodyError(f"invalid value {raw!r}: expected one of {[e.value for e in kind]}") from None
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        if not isinstance(raw, dict):
            raise BadBodyError(f"expected a JSON object ({kind.__name__})")
        try:
            return m.dump(kind.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise BadBodyError(f"invalid {kind.__name__}: {where} {first.get('msg', '')}".strip()) from None
    raise AssertionError(f"unknown policy kind {kind!r}")
