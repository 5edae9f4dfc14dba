"""Policy commands shared by ``namespaces``, ``topics`` and ``topicPolicies``.

Theory of operation: ``pulsar-admin`` has ``set-X`` / ``get-X`` / ``remove-X``
for each policy, at namespace level (argument ``tenant/ns``) and at topic
level (argument a topic), with slightly different names and flags per level
(``set-max-producers-per-topic -p`` vs ``set-max-producers -p``,
``-c/--max-unacked-messages-per-consumer`` vs ``-m/--maxNum``).  Each
:class:`PolicyCmd` row names the policy (the ``admin_client`` method suffix),
its command stem at each level, how to add its flags and how to turn parsed
flags into the request value.  :func:`register_policy_commands` adds the three
commands of every row to a group.  Topic-level getters take ``-ap/--applied``
(effective value) and every topic-level command takes ``-g/--global``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from magnetar.admin_client import (
    AutoTopicCreationOverride,
    BacklogQuota,
    DelayedDeliveryPolicies,
    DispatchRate,
    InactiveTopicPolicies,
    PersistencePolicies,
    PublishRate,
    RetentionPolicies,
    SubscribeRate,
)
from magnetar.admin_client.models import (
    BacklogQuotaPolicy,
    BacklogQuotaType,
    InactiveTopicDeleteMode,
    SchemaCompatibilityStrategy,
    SubscriptionType,
)
from magnetar.cli.admin.common import (
    CliUsageError,
    Ctx,
    command,
    csv,
    ns_arg,
    size_arg,
    time_s_arg,
    topic_arg,
)

Flags = Callable[[argparse.ArgumentParser, str], None]
Value = Callable[[argparse.Namespace], Any]
MB = 1024 * 1024


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


def _one(
    ns: tuple[str, ...], topic: tuple[str, ...], help_text: str, conv: Callable[[str], Any] = int
) -> Flags:
    def add(p: argparse.ArgumentParser, level: str) -> None:
        p.add_argument(
            *(ns if level == "ns" else topic), dest="value", type=conv, required=True, help=help_text
        )

    return add


def _same(*names: str, help_text: str, conv: Callable[[str], Any] = int) -> Flags:
    return _one(names, names, help_text, conv)


def _enable_disable(p: argparse.ArgumentParser, level: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-e", "--enable", action="store_true", help="enable")
    g.add_argument("-d", "--disable", action="store_true", help="disable")


def _value(a: argparse.Namespace) -> Any:
    return a.value


def _retention_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-s",
        "--size",
        type=size_arg,
        required=True,
        help="retention size limit with k/m/g/t suffix (e.g. 10M, 16G), or -1 for unlimited",
    )
    p.add_argument(
        "-t",
        "--time",
        type=time_s_arg,
        required=True,
        help="retention time with s/m/h/d/w/y suffix (e.g. 100m, 3h, 2d), or -1 for unlimited",
    )


def _retention(a: argparse.Namespace) -> RetentionPolicies:
    minutes = -1 if a.time == -1 else a.time // 60
    size_mb = -1 if a.size == -1 else a.size // MB
    return RetentionPolicies(minutes, size_mb)


def _backlog_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument("-l", "--limit", type=size_arg, default=-1, help="size limit (e.g. 10M, 16G; -1 = none)")
    p.add_argument(
        "-lt",
        "--limitTime",
        dest="limit_time",
        type=time_s_arg,
        default=-1,
        help="time limit for message age (e.g. 1h; -1 = none)",
    )
    p.add_argument(
        "-p",
        "--policy",
        required=True,
        choices=[str(x) for x in BacklogQuotaPolicy],
        help="what happens when the quota is exceeded",
    )
    _quota_type(p, level)


def _quota_type(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-t",
        "--type",
        default=str(BacklogQuotaType.DESTINATION_STORAGE),
        choices=[str(x) for x in BacklogQuotaType],
        help="backlog quota type (default destination_storage)",
    )


def _backlog(a: argparse.Namespace) -> BacklogQuota:
    if a.type == BacklogQuotaType.MESSAGE_AGE and a.limit_time == -1:
        raise CliUsageError("a message_age backlog quota needs --limitTime")
    return BacklogQuota(a.limit, a.limit_time, BacklogQuotaPolicy(a.policy))


def _persistence_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-e", "--bookkeeper-ensemble", type=int, required=True, help="bookies per ledger (ensemble size)"
    )
    p.add_argument("-w", "--bookkeeper-write-quorum", type=int, required=True, help="copies of each entry")
    p.add_argument("-a", "--bookkeeper-ack-quorum", type=int, required=True, help="acks needed per entry")
    p.add_argument(
        "-r",
        "--ml-mark-delete-max-rate",
        type=float,
        required=True,
        help="max rate of mark-delete updates per second (0 = unthrottled)",
    )


def _persistence(a: argparse.Namespace) -> PersistencePolicies:
    return PersistencePolicies(
        a.bookkeeper_ensemble, a.bookkeeper_write_quorum, a.bookkeeper_ack_quorum, a.ml_mark_delete_max_rate
    )


def _dispatch_flags(prefix: str) -> Flags:
    def add(p: argparse.ArgumentParser, level: str) -> None:
        p.add_argument(
            "-md",
            f"--{prefix}msg-dispatch-rate",
            dest="msg_rate",
            type=int,
            default=-1,
            help="messages per period (-1 = off)",
        )
        p.add_argument(
            "-bd",
            f"--{prefix}byte-dispatch-rate",
            dest="byte_rate",
            type=int,
            default=-1,
            help="bytes per period (-1 = off)",
        )
        p.add_argument(
            "-dt",
            "--dispatch-rate-period",
            dest="period",
            type=int,
            default=1,
            help="period in seconds (default 1)",
        )
        p.add_argument(
            "-rp",
            "--relative-to-publish-rate",
            action="store_true",
            help="rate is relative to the publish rate",
        )

    return add


def _dispatch(a: argparse.Namespace) -> DispatchRate:
    return DispatchRate(a.msg_rate, a.byte_rate, a.relative_to_publish_rate, a.period)


def _publish_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument("-m", "--msg-publish-rate", type=int, default=-1, help="messages per second (-1 = off)")
    p.add_argument("-b", "--byte-publish-rate", type=int, default=-1, help="bytes per second (-1 = off)")


def _subscribe_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-sr", "--subscribe-rate", type=int, default=-1, help="subscribes per period per consumer (-1 = off)"
    )
    p.add_argument(
        "-st", "--subscribe-rate-period", type=int, default=30, help="period in seconds (default 30)"
    )


def _inactive_flags(p: argparse.ArgumentParser, level: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-e", "--enable-delete-while-inactive", action="store_true", help="delete inactive topics")
    g.add_argument("-d", "--disable-delete-while-inactive", action="store_true", help="keep inactive topics")
    p.add_argument(
        "-t",
        "--max-inactive-duration",
        type=time_s_arg,
        required=True,
        help="how long a topic must be inactive (e.g. 1h)",
    )
    p.add_argument(
        "-m",
        "--delete-mode",
        required=True,
        choices=[str(x) for x in InactiveTopicDeleteMode],
        help="when an inactive topic may be deleted",
    )


def _inactive(a: argparse.Namespace) -> InactiveTopicPolicies:
    return InactiveTopicPolicies(
        InactiveTopicDeleteMode(a.delete_mode), a.max_inactive_duration, a.enable_delete_while_inactive
    )


def _delayed_flags(p: argparse.ArgumentParser, level: str) -> None:
    _enable_disable(p, level)
    p.add_argument(
        "-t",
        "--time",
        type=time_s_arg,
        default=1,
        help="tick time of the delayed-delivery tracker (default 1s)",
    )
    p.add_argument(
        "-md",
        "--maxDelay",
        dest="max_delay",
        type=time_s_arg,
        default=0,
        help="max delivery delay (0 = no cap)",
    )


def _auto_topic_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument("-e", "--enable", action="store_true", help="allow automatic topic creation")
    p.add_argument(
        "-t",
        "--type",
        default="non-partitioned",
        choices=("partitioned", "non-partitioned"),
        help="type of automatically created topics",
    )
    p.add_argument(
        "-n", "--num-partitions", type=int, help="partitions of automatically created partitioned topics"
    )


def _offload_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-d",
        "--driver",
        required=True,
        choices=("aws-s3", "S3", "google-cloud-storage", "filesystem", "azureblob", "aliyun-oss"),
        help="offload driver",
    )
    p.add_argument("-r", "--region", help="bucket region")
    p.add_argument("-b", "--bucket", help="bucket name")
    p.add_argument("-e", "--endpoint", help="service endpoint")
    p.add_argument("-i", "--aws-id", help="AWS credential id")
    p.add_argument("-s", "--aws-secret", help="AWS credential secret")
    p.add_argument("--ro", "--s3-role", dest="s3_role", help="S3 role")
    p.add_argument("-rsn", "--s3-role-session-name", help="S3 role session name")
    p.add_argument(
        "-m",
        "-mbs",
        "--maxBlockSizeInBytes",
        dest="max_block",
        type=size_arg,
        default=64 * MB,
        help="max block size (default 64M)",
    )
    p.add_argument(
        "-rb",
        "-rbs",
        "--readBufferSizeInBytes",
        dest="read_buffer",
        type=size_arg,
        default=MB,
        help="read buffer size (default 1M)",
    )
    p.add_argument(
        "-t",
        "-oat",
        "--offloadAfterThreshold",
        dest="threshold",
        type=size_arg,
        default=-1,
        help="offload once the topic's storage exceeds this size (-1 = never)",
    )
    p.add_argument(
        "-ts",
        "-oats",
        "--offloadAfterThresholdInSeconds",
        dest="threshold_s",
        type=time_s_arg,
        default=-1,
        help="offload ledgers older than this (-1 = never)",
    )
    p.add_argument(
        "-dl",
        "-oae",
        "--offloadDeletionLagInMillis",
        dest="deletion_lag",
        type=time_s_arg,
        default=None,
        help="delete offloaded ledgers from BookKeeper after this lag (e.g. 4h)",
    )
    p.add_argument(
        "-orp",
        "--offloadedReadPriority",
        dest="offloaded_read_priority",
        choices=("tiered-storage-first", "bookkeeper-first"),
        help="where reads of offloaded data go first",
    )


def _offload(a: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "managedLedgerOffloadDriver": a.driver,
        "managedLedgerOffloadRegion": a.region,
        "managedLedgerOffloadBucket": a.bucket,
        "managedLedgerOffloadServiceEndpoint": a.endpoint,
        "managedLedgerOffloadMaxBlockSizeInBytes": a.max_block,
        "managedLedgerOffloadReadBufferSizeInBytes": a.read_buffer,
        "managedLedgerOffloadThresholdInBytes": a.threshold,
        "managedLedgerOffloadThresholdInSeconds": a.threshold_s,
        "managedLedgerOffloadDeletionLagInMillis": None if a.deletion_lag is None else a.deletion_lag * 1000,
        "managedLedgerOffloadedReadPriority": a.offloaded_read_priority,
        "s3ManagedLedgerOffloadCredentialId": a.aws_id,
        "s3ManagedLedgerOffloadCredentialSecret": a.aws_secret,
        "s3ManagedLedgerOffloadRole": a.s3_role,
        "s3ManagedLedgerOffloadRoleSessionName": a.s3_role_session_name,
    }
    if a.driver in ("aws-s3", "S3"):
        body.setdefault("s3ManagedLedgerOffloadBucket", a.bucket)
        body["s3ManagedLedgerOffloadRegion"] = a.region
        body["s3ManagedLedgerOffloadServiceEndpoint"] = a.endpoint
    return {k: v for k, v in body.items() if v is not None}


def _strategy(text: str) -> str:
    try:
        return str(SchemaCompatibilityStrategy(text.upper()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"unknown strategy '{text}'") from None


def _sub_types(text: str) -> list[str]:
    out = []
    for t in csv(text):
        match = [str(x) for x in SubscriptionType if str(x).lower() == t.lower()]
        if not match:
            raise argparse.ArgumentTypeError(
                f"unknown subscription type '{t}' (Exclusive, Shared, Failover, Key_Shared)"
            )
        out.append(match[0])
    return out


def _backlog_set(res: Any, target: str, a: argparse.Namespace, kw: dict[str, Any]) -> Any:
    return res.set_backlog_quota(target, _backlog(a), a.type, **kw)


def _backlog_remove(res: Any, target: str, a: argparse.Namespace, kw: dict[str, Any]) -> Any:
    return res.remove_backlog_quota(target, a.type, **kw)


P = PolicyCmd
TABLE: tuple[PolicyCmd, ...] = (
    P(
        "retention",
        "retention",
        "retention",
        "retention of acknowledged messages",
        _retention_flags,
        _retention,
    ),
    P(
        "message_ttl",
        "message-ttl",
        "message-ttl",
        "message time-to-live",
        _one(
            ("-ttl", "--messageTTL"),
            ("-t", "--ttl"),
            "TTL in seconds or with a unit (e.g. 1h); 0 disables",
            time_s_arg,
        ),
        _value,
    ),
    P(
        "backlog_quota",
        "backlog-quota",
        "backlog-quota",
        "backlog quota",
        _backlog_flags,
        _backlog,
        get_stem="backlog-quotas",
        get_method="backlog_quotas",
        set_call=_backlog_set,
        remove_flags=_quota_type,
        remove_call=_backlog_remove,
    ),
    P(
        "persistence",
        "persistence",
        "persistence",
        "persistence (ensemble, write and ack quorum)",
        _persistence_flags,
        _persistence,
    ),
    P(
        "deduplication",
        "deduplication",
        "deduplication",
        "message deduplication",
        _enable_disable,
        lambda a: bool(a.enable),
    ),
    P(
        "deduplication_snapshot_interval",
        "deduplication-snapshot-interval",
        "deduplication-snapshot-interval",
        "deduplication snapshot interval",
        _same("-i", "--interval", help_text="interval in seconds"),
        _value,
    ),
    P(
        "schema_compatibility_strategy",
        "schema-compatibility-strategy",
        "schema-compatibility-strategy",
        "schema compatibility strategy",
        _same(
            "-c",
            "--compatibility",
            help_text="strategy: " + ", ".join(str(x) for x in SchemaCompatibilityStrategy),
            conv=_strategy,
        ),
        _value,
        remove_verb=None,
    ),
    P(
        "is_allow_auto_update_schema",
        "is-allow-auto-update-schema",
        None,
        "whether producers may register new schema versions",
        _enable_disable,
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
        _auto_topic_flags,
        lambda a: AutoTopicCreationOverride(
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
        _dispatch_flags(""),
        _dispatch,
    ),
    P(
        "subscription_dispatch_rate",
        "subscription-dispatch-rate",
        "subscription-dispatch-rate",
        "per-subscription dispatch rate",
        _dispatch_flags("sub-"),
        _dispatch,
    ),
    P(
        "replicator_dispatch_rate",
        "replicator-dispatch-rate",
        "replicator-dispatch-rate",
        "per-replicator dispatch rate",
        _dispatch_flags(""),
        _dispatch,
    ),
    P(
        "publish_rate",
        "publish-rate",
        "publish-rate",
        "per-topic publish rate",
        _publish_flags,
        lambda a: PublishRate(a.msg_publish_rate, a.byte_publish_rate),
    ),
    P(
        "subscribe_rate",
        "subscribe-rate",
        "subscribe-rate",
        "per-consumer subscribe rate",
        _subscribe_flags,
        lambda a: SubscribeRate(a.subscribe_rate, a.subscribe_rate_period),
    ),
    P(
        "max_producers",
        "max-producers-per-topic",
        "max-producers",
        "max producers per topic",
        _one(
            ("-p", "--max-producers-per-topic"),
            ("-p", "--max-producers"),
            "max producers (0 = broker default)",
        ),
        _value,
    ),
    P(
        "max_consumers",
        "max-consumers-per-topic",
        "max-consumers",
        "max consumers per topic",
        _one(("-c", "--max-consumers-per-topic"), ("-c", "--max-consumers"), "max consumers"),
        _value,
    ),
    P(
        "max_consumers_per_subscription",
        "max-consumers-per-subscription",
        "max-consumers-per-subscription",
        "max consumers per subscription",
        _same("-c", "--max-consumers-per-subscription", help_text="max consumers"),
        _value,
    ),
    P(
        "max_unacked_messages_per_consumer",
        "max-unacked-messages-per-consumer",
        "max-unacked-messages-on-consumer",
        "max unacknowledged messages per consumer",
        _one(("-c", "--max-unacked-messages-per-consumer"), ("-m", "--maxNum"), "max unacked messages"),
        _value,
    ),
    P(
        "max_unacked_messages_per_subscription",
        "max-unacked-messages-per-subscription",
        "max-unacked-messages-on-subscription",
        "max unacknowledged messages per subscription",
        _one(("-c", "--max-unacked-messages-per-subscription"), ("-m", "--maxNum"), "max unacked messages"),
        _value,
    ),
    P(
        "max_subscriptions_per_topic",
        "max-subscriptions-per-topic",
        "max-subscriptions-per-topic",
        "max subscriptions per topic",
        _same("-m", "--max-subscriptions-per-topic", help_text="max subscriptions"),
        _value,
    ),
    P(
        "max_topics_per_namespace",
        "max-topics-per-namespace",
        None,
        "max topics in the namespace",
        _same("-t", "--max-topics-per-namespace", help_text="max topics"),
        _value,
    ),
    P(
        "max_message_size",
        None,
        "max-message-size",
        "max message size",
        _same("-m", "--max-message-size", help_text="max message size in bytes", conv=size_arg),
        _value,
    ),
    P(
        "subscription_expiration_time",
        "subscription-expiration-time",
        None,
        "expiry time of inactive subscriptions",
        _same("-t", "--time", help_text="minutes"),
        _value,
    ),
    P(
        "inactive_topic_policies",
        "inactive-topic-policies",
        "inactive-topic-policies",
        "deletion of inactive topics",
        _inactive_flags,
        _inactive,
    ),
    P(
        "delayed_delivery",
        "delayed-delivery",
        "delayed-delivery",
        "delayed delivery",
        _delayed_flags,
        lambda a: DelayedDeliveryPolicies(a.time * 1000, bool(a.enable), a.max_delay * 1000),
    ),
    P(
        "subscription_types_enabled",
        "subscription-types-enabled",
        "subscription-types-enabled",
        "enabled subscription types",
        _same(
            "-t",
            "--types",
            help_text="comma-separated: Exclusive,Shared,Failover,Key_Shared",
            conv=_sub_types,
        ),
        _value,
    ),
    P(
        "compaction_threshold",
        "compaction-threshold",
        "compaction-threshold",
        "automatic compaction threshold",
        _same(
            "-t",
            "--threshold",
            help_text="backlog size that triggers compaction (e.g. 10M; 0 disables)",
            conv=size_arg,
        ),
        _value,
    ),
    P(
        "offload_threshold",
        "offload-threshold",
        None,
        "automatic offload threshold",
        _same(
            "-s",
            "--size",
            help_text="keep this much in BookKeeper, offload the rest (e.g. 10M; -1 disables)",
            conv=size_arg,
        ),
        _value,
        remove_verb=None,
    ),
    P(
        "offload_deletion_lag",
        "offload-deletion-lag",
        None,
        "deletion lag of offloaded ledgers",
        _same("-l", "--lag", help_text="lag (e.g. 4h)", conv=time_s_arg),
        lambda a: a.value * 1000,
        remove_verb="clear",
    ),
    P(
        "offload_policies",
        "offload-policies",
        "offload-policies",
        "tiered-storage offload policies",
        _offload_flags,
        _offload,
    ),
    P(
        "replication_clusters",
        "clusters",
        "replication-clusters",
        "replication clusters",
        _same("-c", "--clusters", help_text="comma-separated cluster names", conv=csv),
        _value,
        remove_verb=None,
    ),
    P(
        "encryption_required",
        "encryption-required",
        None,
        "required message encryption",
        _enable_disable,
        lambda a: bool(a.enable),
        remove_verb=None,
        get_stem="",
    ),
    P(
        "subscription_auth_mode",
        "subscription-auth-mode",
        None,
        "subscription auth mode",
        _same("-m", "--subscription-auth-mode", help_text="None or Prefix", conv=str),
        _value,
        remove_verb=None,
    ),
    P(
        "anti_affinity_group",
        "anti-affinity-group",
        None,
        "anti-affinity group",
        _same("-g", "--group", help_text="group name", conv=str),
        _value,
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


def register_policy_commands(
    sub: argparse._SubParsersAction, level: str, resource: Callable[[Ctx], Any]
) -> None:
    """Add set-/get-/remove- commands of every table row that exists at ``level`` ("ns" or "topic")."""
    target = ns_arg if level == "ns" else topic_arg
    for row in TABLE:
        stem = row.ns if level == "ns" else row.topic
        if stem is None:
            continue
        p = command(
            sub, f"set-{stem}", f"set the {row.doc} of a {_noun(level)}", _set_runner(row, level, resource)
        )
        target(p)
        row.flags(p, level)
        _global_flag(p, level)
        if row.get_stem != "":
            get_stem = row.get_stem or stem
            p = command(
                sub,
                f"get-{get_stem}",
                f"print the {row.doc} of a {_noun(level)} (nothing when unset)",
                _get_runner(row, level, resource),
            )
            target(p)
            if level == "topic":
                p.add_argument(
                    "-ap",
                    "--applied",
                    action="store_true",
                    help="print the effective value (topic, else namespace, else broker default)",
                )
            _global_flag(p, level)
        if row.remove_verb and (level == "ns" or not row.ns_only_remove):
            p = command(
                sub,
                f"{row.remove_verb}-{stem}",
                f"remove the {row.doc} of a {_noun(level)} (the default applies again)",
                _remove_runner(row, level, resource),
            )
            target(p)
            if row.remove_flags:
                row.remove_flags(p, level)
            _global_flag(p, level)


def _noun(level: str) -> str:
    return "namespace" if level == "ns" else "topic"


def _global_flag(p: argparse.ArgumentParser, level: str) -> None:
    if level == "topic":
        p.add_argument(
            "-g",
            "--global",
            dest="is_global",
            action="store_true",
            help="use the global (replicated) topic policy store",
        )


def _target(a: argparse.Namespace, level: str) -> str:
    return a.namespace if level == "ns" else a.topic


def _kw(a: argparse.Namespace, level: str) -> dict[str, Any]:
    return {"is_global": True} if level == "topic" and a.is_global else {}


def _set_runner(
    row: PolicyCmd, level: str, resource: Callable[[Ctx], Any]
) -> Callable[[Ctx, argparse.Namespace], None]:
    def run(c: Ctx, a: argparse.Namespace) -> None:
        res = resource(c)
        if row.set_call is not None:
            row.set_call(res, _target(a, level), a, _kw(a, level))
        else:
            getattr(res, "set_" + row.policy)(_target(a, level), row.value(a), **_kw(a, level))

    return run


def _get_runner(
    row: PolicyCmd, level: str, resource: Callable[[Ctx], Any]
) -> Callable[[Ctx, argparse.Namespace], None]:
    def run(c: Ctx, a: argparse.Namespace) -> None:
        kw = _kw(a, level)
        if level == "topic" and a.applied:
            kw["applied"] = True
        c.emit(getattr(resource(c), "get_" + (row.get_method or row.policy))(_target(a, level), **kw))

    return run


def _remove_runner(
    row: PolicyCmd, level: str, resource: Callable[[Ctx], Any]
) -> Callable[[Ctx, argparse.Namespace], None]:
    def run(c: Ctx, a: argparse.Namespace) -> None:
        res = resource(c)
        if row.remove_call is not None:
            row.remove_call(res, _target(a, level), a, _kw(a, level))
        else:
            getattr(res, "remove_" + row.policy)(_target(a, level), **_kw(a, level))

    return run
