"""The policy command table: one row per policy, with its names and flags at each level.

Theory of operation: a :class:`PolicyCmd` row names the policy (the
``admin_client`` method suffix: ``get_<policy>`` / ``set_<policy>`` /
``remove_<policy>``), its command stem at namespace and at topic level (None
where ``pulsar-admin`` has no such command), the function adding its flags and
the one building the request value (both in ``policy_flags``), and the odd
cases: a getter under another name (``get-backlog-quotas``), another remove
verb (``clear-offload-deletion-lag``, ``delete-anti-affinity-group``), or a
custom call (backlog quotas carry their type).  ``policy_cmds`` turns the rows
into commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from magnetar.admin_client import models
from magnetar.cli.admin import policy_flags as pf
from magnetar.cli.admin.common import csv, size_arg, time_s_arg
from magnetar.cli.admin.policy_flags import Flags, Value
from magnetar.common.rest_enums import SchemaCompatibilityStrategy


@dataclass(frozen=True)
class PolicyCmd:
    policy: str  # admin_client suffix: get_<policy> / set_<policy> / remove_<policy>
    ns: str | None  # command stem at namespace level (None: not there)
    topic: str | None  # command stem at topic level
    doc: str
    flags: Flags
    value: Value
    get_stem: str | None = None  # e.g. "backlog-quotas" (None: same stem); "" = no getter
    remove_verb: str | None = "remove"  # e.g. "clear", "delete"; None = no remover
    ns_only_remove: bool = False  # remover exists at namespace level only
    set_call: Callable[[Any, str, argparse.Namespace, dict[str, Any]], Any] | None = None
    remove_flags: Flags | None = None
    remove_call: Callable[[Any, str, argparse.Namespace, dict[str, Any]], Any] | None = None
    get_method: str | None = None


P = PolicyCmd
TABLE: tuple[PolicyCmd, ...] = (
    P(
        "retention",
        "retention",
        "retention",
        "retention of acknowledged messages",
        pf.retention_flags,
        pf.retention,
    ),
    P(
        "message_ttl",
        "message-ttl",
        "message-ttl",
        "message time-to-live",
        pf.one(
            ("-ttl", "--messageTTL"),
            ("-t", "--ttl"),
            "TTL in seconds or with a unit (e.g. 1h); 0 disables",
            time_s_arg,
        ),
        pf.value,
    ),
    P(
        "backlog_quota",
        "backlog-quota",
        "backlog-quota",
        "backlog quota",
        pf.backlog_flags,
        pf.backlog,
        get_stem="backlog-quotas",
        get_method="backlog_quotas",
        set_call=pf.backlog_set,
        remove_flags=pf.quota_type,
        remove_call=pf.backlog_remove,
    ),
    P(
        "persistence",
        "persistence",
        "persistence",
        "persistence (ensemble, write and ack quorum)",
        pf.persistence_flags,
        pf.persistence,
    ),
    P(
        "deduplication",
        "deduplication",
        "deduplication",
        "message deduplication",
        pf.enable_disable,
        lambda a: bool(a.enable),
    ),
    P(
        "deduplication_snapshot_interval",
        "deduplication-snapshot-interval",
        "deduplication-snapshot-interval",
        "deduplication snapshot interval",
        pf.same("-i", "--interval", help_text="interval in seconds"),
        pf.value,
    ),
    P(
        "schema_compatibility_strategy",
        "schema-compatibility-strategy",
        "schema-compatibility-strategy",
        "schema compatibility strategy",
        pf.same(
            "-c",
            "--compatibility",
            help_text="strategy: " + ", ".join(str(x) for x in SchemaCompatibilityStrategy),
            conv=pf.strategy,
        ),
        pf.value,
        remove_verb=None,
    ),
    P(
        "is_allow_auto_update_schema",
        "is-allow-auto-update-schema",
        None,
        "whether producers may register new schema versions",
        pf.enable_disable,
        lambda a: bool(a.enable),
        remove_verb=None,
    ),
    P(
        "schema_validation_enforced",
        "schema-validation-enforce",
        None,
        "schema validation enforcement",
        lambda p, lvl: p.add_argument("-d", "--disable", action="store_true", help="disable enforcement"),
        lambda a: not a.disable,
        remove_verb=None,
    ),
    P(
        "auto_topic_creation",
        "auto-topic-creation",
        None,
        "automatic topic creation override",
        pf.auto_topic_flags,
        lambda a: models.AutoTopicCreationOverride(
            a.enable, a.type, a.num_partitions if a.type == "partitioned" else None
        ),
    ),
    P(
        "auto_subscription_creation",
        "auto-subscription-creation",
        None,
        "automatic subscription creation override",
        lambda p, lvl: p.add_argument(
            "-e", "--enable", action="store_true", help="allow automatic subscription creation"
        ),
        lambda a: {"allowAutoSubscriptionCreation": bool(a.enable)},
    ),
    P(
        "dispatch_rate",
        "dispatch-rate",
        "dispatch-rate",
        "per-topic message dispatch rate",
        pf.dispatch_flags(""),
        pf.dispatch,
    ),
    P(
        "subscription_dispatch_rate",
        "subscription-dispatch-rate",
        "subscription-dispatch-rate",
        "per-subscription dispatch rate",
        pf.dispatch_flags("sub-"),
        pf.dispatch,
    ),
    P(
        "replicator_dispatch_rate",
        "replicator-dispatch-rate",
        "replicator-dispatch-rate",
        "per-replicator dispatch rate",
        pf.dispatch_flags(""),
        pf.dispatch,
    ),
    P(
        "publish_rate",
        "publish-rate",
        "publish-rate",
        "per-topic publish rate",
        pf.publish_flags,
        lambda a: models.PublishRate(a.msg_publish_rate, a.byte_publish_rate),
    ),
    P(
        "subscribe_rate",
        "subscribe-rate",
        "subscribe-rate",
        "per-consumer subscribe rate",
        pf.subscribe_flags,
        lambda a: models.SubscribeRate(a.subscribe_rate, a.subscribe_rate_period),
    ),
    P(
        "max_producers",
        "max-producers-per-topic",
        "max-producers",
        "max producers per topic",
        pf.one(
            ("-p", "--max-producers-per-topic"),
            ("-p", "--max-producers"),
            "max producers (0 = broker default)",
        ),
        pf.value,
    ),
    P(
        "max_consumers",
        "max-consumers-per-topic",
        "max-consumers",
        "max consumers per topic",
        pf.one(("-c", "--max-consumers-per-topic"), ("-c", "--max-consumers"), "max consumers"),
        pf.value,
    ),
    P(
        "max_consumers_per_subscription",
        "max-consumers-per-subscription",
        "max-consumers-per-subscription",
        "max consumers per subscription",
        pf.same("-c", "--max-consumers-per-subscription", help_text="max consumers"),
        pf.value,
    ),
    P(
        "max_unacked_messages_per_consumer",
        "max-unacked-messages-per-consumer",
        "max-unacked-messages-on-consumer",
        "max unacknowledged messages per consumer",
        pf.one(("-c", "--max-unacked-messages-per-consumer"), ("-m", "--maxNum"), "max unacked messages"),
        pf.value,
    ),
    P(
        "max_unacked_messages_per_subscription",
        "max-unacked-messages-per-subscription",
        "max-unacked-messages-on-subscription",
        "max unacknowledged messages per subscription",
        pf.one(("-c", "--max-unacked-messages-per-subscription"), ("-m", "--maxNum"), "max unacked messages"),
        pf.value,
    ),
    P(
        "max_subscriptions_per_topic",
        "max-subscriptions-per-topic",
        "max-subscriptions-per-topic",
        "max subscriptions per topic",
        pf.same("-m", "--max-subscriptions-per-topic", help_text="max subscriptions"),
        pf.value,
    ),
    P(
        "max_topics_per_namespace",
        "max-topics-per-namespace",
        None,
        "max topics in the namespace",
        pf.same("-t", "--max-topics-per-namespace", help_text="max topics"),
        pf.value,
    ),
    P(
        "max_message_size",
        None,
        "max-message-size",
        "max message size",
        pf.same("-m", "--max-message-size", help_text="max message size in bytes", conv=size_arg),
        pf.value,
    ),
    P(
        "subscription_expiration_time",
        "subscription-expiration-time",
        None,
        "expiry time of inactive subscriptions",
        pf.same("-t", "--time", help_text="minutes"),
        pf.value,
    ),
    P(
        "inactive_topic_policies",
        "inactive-topic-policies",
        "inactive-topic-policies",
        "deletion of inactive topics",
        pf.inactive_flags,
        pf.inactive,
    ),
    P(
        "delayed_delivery",
        "delayed-delivery",
        "delayed-delivery",
        "delayed delivery",
        pf.delayed_flags,
        lambda a: models.DelayedDeliveryPolicies(a.time * 1000, bool(a.enable), a.max_delay * 1000),
    ),
    P(
        "subscription_types_enabled",
        "subscription-types-enabled",
        "subscription-types-enabled",
        "enabled subscription types",
        pf.same(
            "-t",
            "--types",
            help_text="comma-separated: Exclusive,Shared,Failover,Key_Shared",
            conv=pf.sub_types,
        ),
        pf.value,
    ),
    P(
        "compaction_threshold",
        "compaction-threshold",
        "compaction-threshold",
        "automatic compaction threshold",
        pf.same(
            "-t",
            "--threshold",
            help_text="backlog size that triggers compaction (e.g. 10M; 0 disables)",
            conv=size_arg,
        ),
        pf.value,
    ),
    P(
        "offload_threshold",
        "offload-threshold",
        None,
        "automatic offload threshold",
        pf.same(
            "-s",
            "--size",
            help_text="keep this much in BookKeeper, offload the rest (e.g. 10M; -1 disables)",
            conv=size_arg,
        ),
        pf.value,
        remove_verb=None,
    ),
    P(
        "offload_deletion_lag",
        "offload-deletion-lag",
        None,
        "deletion lag of offloaded ledgers",
        pf.same("-l", "--lag", help_text="lag (e.g. 4h)", conv=time_s_arg),
        lambda a: a.value * 1000,
        remove_verb="clear",
    ),
    P(
        "offload_policies",
        "offload-policies",
        "offload-policies",
        "tiered-storage offload policies",
        pf.offload_flags,
        pf.offload,
    ),
    P(
        "replication_clusters",
        "clusters",
        "replication-clusters",
        "replication clusters",
        pf.same("-c", "--clusters", help_text="comma-separated cluster names", conv=csv),
        pf.value,
        remove_verb=None,
    ),
    P(
        "encryption_required",
        "encryption-required",
        None,
        "required message encryption",
        pf.enable_disable,
        lambda a: bool(a.enable),
        remove_verb=None,
        get_stem="",
    ),
    P(
        "schema_autoupdate_strategy",
        "schema-autoupdate-strategy",
        None,
        "schema auto-update compatibility strategy (deprecated)",
        pf.autoupdate_flags,
        pf.autoupdate,
        remove_verb=None,
    ),
    P(
        "subscription_auth_mode",
        "subscription-auth-mode",
        None,
        "subscription auth mode",
        pf.same("-m", "--subscription-auth-mode", help_text="None or Prefix", conv=str),
        pf.value,
        remove_verb=None,
    ),
    P(
        "anti_affinity_group",
        "anti-affinity-group",
        None,
        "anti-affinity group",
        pf.same("-g", "--group", help_text="group name", conv=str),
        pf.value,
        remove_verb="delete",
    ),
    P(
        "bookie_affinity_group",
        "bookie-affinity-group",
        None,
        "bookie affinity group",
        lambda p, lvl: (
            p.add_argument("-pg", "--primary-group", required=True, help="primary bookie group"),
            p.add_argument("-sg", "--secondary-group", help="secondary bookie group"),
        ),
        lambda a: {
            "bookkeeperAffinityGroupPrimary": a.primary_group,
            **({"bookkeeperAffinityGroupSecondary": a.secondary_group} if a.secondary_group else {}),
        },
        remove_verb="delete",
    ),
)
