"""Flags and value builders of the policy commands (``policy_cmds``).

Theory of operation: for each policy a pair of functions: one adds the
``pulsar-admin`` flags of its ``set-`` command to a parser (``level`` is
"ns" or "topic", for the few flags whose names differ between them), one
turns the parsed flags into the request body (a model of
``magnetar.admin_client.models`` or a plain Pulsar-shaped value).  Sizes and
times go through Pulsar's shorthand parsers (``10M``, ``3h``, ``-1``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from magnetar.admin_client import models
from magnetar.cli.admin.common import CliUsageError, csv, size_arg, time_s_arg
from magnetar.common.rest_enums import (
    BacklogQuotaPolicy,
    BacklogQuotaType,
    InactiveTopicDeleteMode,
    SchemaCompatibilityStrategy,
    SubscriptionType,
)

Flags = Callable[[argparse.ArgumentParser, str], None]
Value = Callable[[argparse.Namespace], Any]
MB = 1024 * 1024


def one(
    ns: tuple[str, ...], topic: tuple[str, ...], help_text: str, conv: Callable[[str], Any] = int
) -> Flags:
    def add(p: argparse.ArgumentParser, level: str) -> None:
        p.add_argument(
            *(ns if level == "ns" else topic), dest="value", type=conv, required=True, help=help_text
        )

    return add


def same(*names: str, help_text: str, conv: Callable[[str], Any] = int) -> Flags:
    return one(names, names, help_text, conv)


def enable_disable(p: argparse.ArgumentParser, level: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-e", "--enable", action="store_true", help="enable")
    g.add_argument("-d", "--disable", action="store_true", help="disable")


def value(a: argparse.Namespace) -> Any:
    return a.value


def retention_flags(p: argparse.ArgumentParser, level: str) -> None:
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


def retention(a: argparse.Namespace) -> models.RetentionPolicies:
    minutes = -1 if a.time == -1 else a.time // 60
    size_mb = -1 if a.size == -1 else a.size // MB
    return models.RetentionPolicies(minutes, size_mb)


def backlog_flags(p: argparse.ArgumentParser, level: str) -> None:
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
    quota_type(p, level)


def quota_type(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-t",
        "--type",
        default=str(BacklogQuotaType.DESTINATION_STORAGE),
        choices=[str(x) for x in BacklogQuotaType],
        help="backlog quota type (default destination_storage)",
    )


def backlog(a: argparse.Namespace) -> models.BacklogQuota:
    if a.type == BacklogQuotaType.MESSAGE_AGE and a.limit_time == -1:
        raise CliUsageError("a message_age backlog quota needs --limitTime")
    return models.BacklogQuota(a.limit, a.limit_time, BacklogQuotaPolicy(a.policy))


def persistence_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-e", "--bookkeeper-ensemble", type=int, required=True, help="bookies per ledger (ensemble size)"
    )
    p.add_argument("-w", "--bookkeeper-write-quorum", type=int, required=True, help="copies of each entry")
    p.add_argument("-a", "--bookkeeper-ack-quorum", type=int, required=True, help="acks needed per entry")
    p.add_argument(
        "-r",
        "--ml-mark-delete-max-rate",
        type=float,
        default=0.0,
        help="max rate of mark-delete updates per second (0 = unthrottled)",
    )


def persistence(a: argparse.Namespace) -> models.PersistencePolicies:
    return models.PersistencePolicies(
        a.bookkeeper_ensemble, a.bookkeeper_write_quorum, a.bookkeeper_ack_quorum, a.ml_mark_delete_max_rate
    )


def dispatch_flags(prefix: str) -> Flags:
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


def dispatch(a: argparse.Namespace) -> models.DispatchRate:
    return models.DispatchRate(a.msg_rate, a.byte_rate, a.relative_to_publish_rate, a.period)


def publish_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument("-m", "--msg-publish-rate", type=int, default=-1, help="messages per second (-1 = off)")
    p.add_argument("-b", "--byte-publish-rate", type=int, default=-1, help="bytes per second (-1 = off)")


def subscribe_flags(p: argparse.ArgumentParser, level: str) -> None:
    p.add_argument(
        "-sr", "--subscribe-rate", type=int, default=-1, help="subscribes per period per consumer (-1 = off)"
    )
    p.add_argument(
        "-st", "--subscribe-rate-period", type=int, default=30, help="period in seconds (default 30)"
    )


def inactive_flags(p: argparse.ArgumentParser, level: str) -> None:
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


def inactive(a: argparse.Namespace) -> models.InactiveTopicPolicies:
    return models.InactiveTopicPolicies(
        InactiveTopicDeleteMode(a.delete_mode), a.max_inactive_duration, a.enable_delete_while_inactive
    )


def delayed_flags(p: argparse.ArgumentParser, level: str) -> None:
    enable_disable(p, level)
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


def auto_topic_flags(p: argparse.ArgumentParser, level: str) -> None:
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


def offload_flags(p: argparse.ArgumentParser, level: str) -> None:
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


def offload(a: argparse.Namespace) -> dict[str, Any]:
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


def strategy(text: str) -> str:
    try:
        return str(SchemaCompatibilityStrategy(text.upper()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"unknown strategy '{text}'") from None


AUTO_UPDATE_STRATEGIES = (
    "Backward",
    "Forward",
    "Full",
    "AlwaysCompatible",
    "BackwardTransitive",
    "ForwardTransitive",
    "FullTransitive",
)


def autoupdate_flags(p: argparse.ArgumentParser, level: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-c", "--compatibility", choices=AUTO_UPDATE_STRATEGIES, help="compatibility level")
    g.add_argument("-d", "--disabled", action="store_true", help="disable automatic schema updates")


def autoupdate(a: argparse.Namespace) -> str:
    return "AutoUpdateDisabled" if a.disabled else a.compatibility


def sub_types(text: str) -> list[str]:
    out = []
    for t in csv(text):
        match = [str(x) for x in SubscriptionType if str(x).lower() == t.lower()]
        if not match:
            raise argparse.ArgumentTypeError(
                f"unknown subscription type '{t}' (Exclusive, Shared, Failover, Key_Shared)"
            )
        out.append(match[0])
    return out


def backlog_set(res: Any, target: str, a: argparse.Namespace, kw: dict[str, Any]) -> Any:
    return res.set_backlog_quota(target, backlog(a), a.type, **kw)


def backlog_remove(res: Any, target: str, a: argparse.Namespace, kw: dict[str, Any]) -> Any:
    return res.remove_backlog_quota(target, a.type, **kw)
