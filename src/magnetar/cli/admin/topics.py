"""``magnetar admin topics``: topic lifecycle, partitions, stats, admin operations.

Theory of operation: ``pulsar-admin topics`` subcommands with its flags; one
or a few calls of ``admin.topics`` each.  ``list`` merges the persistent and
non-persistent listings as ``pulsar-admin`` does; ``offload -s`` picks the
first ledger to keep from the internal stats (ledgers newest first, until
their sizes exceed the threshold) and offloads everything before it;
``compaction-status -w`` / ``offload-status -w`` poll once a second up to
``--wait-timeout``.  Subscription and message commands are in
``topic_cursor_cmds``; topic-level policy commands come from ``policy_cmds``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from magnetar.admin_client import models
from magnetar.cli.admin import topic_cursor_cmds
from magnetar.cli.admin.common import CliUsageError, Ctx, command, kv_map, ns_arg, size_arg, topic_arg
from magnetar.cli.admin.policy_cmds import register_policy_commands

POLL_INTERVAL_S = 1.0


def register(sub: argparse._SubParsersAction) -> None:
    _lifecycle(sub)
    _stats(sub)
    _operations(sub)
    topic_cursor_cmds.register(sub)
    register_policy_commands(sub, "topic", lambda c: c.admin.topic_policies)


def _lifecycle(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "list", "list the topics of a namespace (partitions listed individually)", _list)
    ns_arg(p)
    p.add_argument("-td", "--topic-domain", choices=("persistent", "non_persistent"), help="only this domain")
    p.add_argument("-b", "--bundle", help="only topics of this bundle")
    p.add_argument("-ist", "--include-system-topic", action="store_true", help="include system topics")
    p = command(
        sub,
        "list-partitioned-topics",
        "list the partitioned topics of a namespace",
        lambda c, a: c.emit(c.admin.topics.list_partitioned(a.namespace)),
    )
    ns_arg(p)
    p = command(
        sub,
        "create",
        "create a non-partitioned topic",
        lambda c, a: c.admin.topics.create(a.topic, properties=kv_map(a.metadata) or None),
    )
    topic_arg(p)
    p.add_argument("-m", "--metadata", action="append", help="topic properties k=v (repeatable)")
    p = command(
        sub,
        "create-partitioned-topic",
        "create a partitioned topic",
        lambda c, a: c.admin.topics.create_partitioned(
            a.topic, a.partitions, properties=kv_map(a.metadata) or None
        ),
    )
    topic_arg(p)
    p.add_argument("-p", "--partitions", type=int, required=True, help="number of partitions")
    p.add_argument("-m", "--metadata", action="append", help="topic properties k=v (repeatable)")
    p = command(
        sub,
        "create-missed-partitions",
        "create partitions missing from a partitioned topic",
        lambda c, a: c.admin.topics.create_missed_partitions(a.topic),
    )
    topic_arg(p)
    p = command(
        sub,
        "update-partitioned-topic",
        "grow a partitioned topic to more partitions",
        lambda c, a: c.admin.topics.update_partitions(
            a.topic, a.partitions, update_local_only=a.update_local_only, force=a.force
        ),
    )
    topic_arg(p)
    p.add_argument(
        "-p", "--partitions", type=int, required=True, help="new number of partitions (only grows)"
    )
    p.add_argument("-ulo", "--update-local-only", action="store_true", help="update only the local cluster")
    p.add_argument("-f", "--force", action="store_true", help="update even if partitions already exist")
    p = command(
        sub,
        "get-partitioned-topic-metadata",
        'print {"partitions": N} of a topic',
        lambda c, a: c.emit(c.admin.topics.get_partitioned_metadata(a.topic)),
    )
    topic_arg(p)
    p = command(
        sub,
        "delete",
        "delete a non-partitioned topic",
        lambda c, a: c.admin.topics.delete(a.topic, force=a.force),
    )
    topic_arg(p)
    p.add_argument(
        "-f", "--force", action="store_true", help="delete even with connected producers/consumers"
    )
    p.add_argument("-d", "--deleteSchema", action="store_true", help="ignored: the schema is always deleted")
    p = command(
        sub,
        "delete-partitioned-topic",
        "delete a partitioned topic and all its partitions",
        lambda c, a: c.admin.topics.delete_partitioned(a.topic, force=a.force),
    )
    topic_arg(p)
    p.add_argument(
        "-f", "--force", action="store_true", help="delete even with connected producers/consumers"
    )
    p.add_argument("-d", "--deleteSchema", action="store_true", help="ignored: the schema is always deleted")
    p = command(sub, "lookup", "print the broker serving a topic", _lookup)
    topic_arg(p)
    p = command(
        sub, "partitioned-lookup", "print the broker serving each partition of a topic", _partitioned_lookup
    )
    topic_arg(p)
    p = command(
        sub,
        "bundle-range",
        "print the namespace bundle a topic belongs to",
        lambda c, a: c.emit(c.admin.topics.get_bundle_range(a.topic)),
    )
    topic_arg(p)
    p = command(
        sub,
        "permissions",
        "print the permissions on a topic",
        lambda c, a: c.emit(c.admin.topics.get_permissions(a.topic)),
    )
    topic_arg(p)
    p = command(
        sub,
        "grant-permission",
        "grant actions on a topic to a role",
        lambda c, a: c.admin.topics.grant_permission(
            a.topic, a.role, [x.strip() for x in a.actions.split(",")]
        ),
    )
    topic_arg(p)
    p.add_argument("--role", required=True, help="client role")
    p.add_argument("--actions", required=True, help="comma-separated: produce,consume")
    p = command(
        sub,
        "revoke-permission",
        "revoke a role's permissions on a topic",
        lambda c, a: c.admin.topics.revoke_permission(a.topic, a.role),
    )
    topic_arg(p)
    p.add_argument("--role", required=True, help="client role")
    p = command(
        sub,
        "get-properties",
        "print a topic's properties",
        lambda c, a: c.emit(c.admin.topics.get_properties(a.topic)),
    )
    topic_arg(p)
    p = command(
        sub,
        "update-properties",
        "set (merge) topic properties",
        lambda c, a: c.admin.topics.update_properties(a.topic, kv_map(a.property)),
    )
    topic_arg(p)
    p.add_argument("-p", "--property", action="append", required=True, help="k=v (repeatable)")
    p = command(
        sub,
        "remove-properties",
        "remove one topic property",
        lambda c, a: c.admin.topics.remove_property(a.topic, a.key),
    )
    topic_arg(p)
    p.add_argument("-k", "--key", required=True, help="property key")


def _stats_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-gpb", "--get-precise-backlog", action="store_true", help="count the backlog exactly")
    p.add_argument(
        "-sbs",
        "--get-subscription-backlog-size",
        action="store_true",
        default=True,
        help="include subscription backlog sizes (default on)",
    )
    p.add_argument(
        "-etb",
        "--get-earliest-time-in-backlog",
        action="store_true",
        help="include the publish time of the earliest backlog message",
    )


def _stats(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "stats",
        "print a topic's stats (rates, backlog, producers, subscriptions)",
        lambda c, a: c.emit(
            c.admin.topics.get_stats(
                a.topic,
                get_precise_backlog=a.get_precise_backlog,
                subscription_backlog_size=a.get_subscription_backlog_size,
                get_earliest_time_in_backlog=a.get_earliest_time_in_backlog,
            )
        ),
    )
    topic_arg(p)
    _stats_flags(p)
    p = command(
        sub,
        "partitioned-stats",
        "print the stats of a partitioned topic, summed over partitions",
        lambda c, a: c.emit(
            c.admin.topics.get_partitioned_stats(
                a.topic,
                per_partition=a.per_partition,
                get_precise_backlog=a.get_precise_backlog,
                subscription_backlog_size=a.get_subscription_backlog_size,
                get_earliest_time_in_backlog=a.get_earliest_time_in_backlog,
            )
        ),
    )
    topic_arg(p)
    p.add_argument("--per-partition", action="store_true", help="also print each partition's stats")
    _stats_flags(p)
    p = command(
        sub,
        "stats-internal",
        "print a topic's internal stats (ledgers, cursors)",
        lambda c, a: c.emit(c.admin.topics.get_internal_stats(a.topic, metadata=a.metadata)),
    )
    topic_arg(p)
    p.add_argument("-m", "--metadata", action="store_true", help="include ledger metadata")
    p = command(
        sub,
        "partitioned-stats-internal",
        "print the internal stats of every partition",
        lambda c, a: c.emit(c.admin.topics.get_partitioned_internal_stats(a.topic)),
    )
    topic_arg(p)
    p = command(
        sub,
        "info-internal",
        "print the stored managed-ledger info of a topic",
        lambda c, a: c.emit(c.admin.topics.get_internal_info(a.topic)),
    )
    topic_arg(p)


def _operations(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub, "unload", "unload a topic (clients reconnect)", lambda c, a: c.admin.topics.unload(a.topic)
    )
    topic_arg(p)
    p = command(
        sub,
        "truncate",
        "move every cursor to the end and delete the inactive ledgers of a topic",
        lambda c, a: c.admin.topics.truncate(a.topic),
    )
    topic_arg(p)
    p = command(sub, "terminate", "terminate a topic: no more messages may be published", _terminate)
    topic_arg(p)
    p = command(
        sub,
        "partitioned-terminate",
        "terminate every partition of a partitioned topic",
        lambda c, a: c.admin.topics.terminate_partitioned(a.topic),
    )
    topic_arg(p)
    p = command(sub, "compact", "start compaction of a topic", _compact)
    topic_arg(p)
    p = command(sub, "compaction-status", "print the status of the last compaction", _compaction_status)
    topic_arg(p)
    p.add_argument("-w", "--wait-complete", action="store_true", help="wait until compaction finishes")
    p.add_argument(
        "--wait-timeout", type=float, default=600.0, help="max seconds to wait with -w (default 600)"
    )
    p = command(
        sub,
        "offload",
        "offload older ledgers to tiered storage, keeping --size-threshold in BookKeeper",
        _offload,
    )
    topic_arg(p)
    p.add_argument(
        "-s", "--size-threshold", type=size_arg, required=True, help="data to keep in BookKeeper (e.g. 10M)"
    )
    p = command(sub, "offload-status", "print the status of the last offload", _offload_status)
    topic_arg(p)
    p.add_argument("-w", "--wait-complete", action="store_true", help="wait until the offload finishes")
    p.add_argument(
        "--wait-timeout", type=float, default=600.0, help="max seconds to wait with -w (default 600)"
    )


def _list(c: Ctx, a: argparse.Namespace) -> None:
    topics: list[str] = []
    domains = {
        "persistent": ["persistent"],
        "non_persistent": ["non-persistent"],
        None: ["persistent", "non-persistent"],
    }
    for domain in domains[a.topic_domain]:
        topics.extend(
            c.admin.topics.list(
                a.namespace, domain=domain, bundle=a.bundle, include_system_topic=a.include_system_topic
            )
            or []
        )
    c.emit(topics)


def _lookup(c: Ctx, a: argparse.Namespace) -> None:
    data = c.admin.topics.lookup(a.topic)
    if c.output == "text" and isinstance(data, dict) and "brokerUrl" in data:
        c.print(str(data["brokerUrl"]))
    else:
        c.emit(data)


def _partitioned_lookup(c: Ctx, a: argparse.Namespace) -> None:
    from magnetar.common.naming import TopicName

    meta = c.admin.topics.get_partitioned_metadata(a.topic) or {}
    base = TopicName.get(a.topic)
    names = [str(base.get_partition(i)) for i in range(int(meta.get("partitions", 0)))] or [str(base)]
    owners = {}
    for name in names:
        data = c.admin.topics.lookup(name) or {}
        owners[name] = data.get("brokerUrl", data) if isinstance(data, dict) else data
    if c.output == "text":
        for name, url in owners.items():
            c.print(f"{name}    {url}")
    else:
        c.emit(owners)


def _terminate(c: Ctx, a: argparse.Namespace) -> None:
    mid = c.admin.topics.terminate(a.topic)
    c.print(f"Topic successfully terminated at {mid}")


def _compact(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.topics.trigger_compaction(a.topic)
    c.print(f"Topic compaction requested for {a.topic}")


def _wait_status(c: Ctx, a: argparse.Namespace, fetch: Any) -> dict[str, Any]:
    deadline = time.monotonic() + a.wait_timeout
    status = fetch(a.topic) or {}
    while a.wait_complete and status.get("status") == "RUNNING" and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
        status = fetch(a.topic) or {}
    return status


def _compaction_status(c: Ctx, a: argparse.Namespace) -> int:
    status = _wait_status(c, a, c.admin.topics.compaction_status)
    return _print_status(c, a.topic, status, "Compaction", "compaction")


def _offload_status(c: Ctx, a: argparse.Namespace) -> int:
    status = _wait_status(c, a, c.admin.topics.offload_status)
    return _print_status(c, a.topic, status, "Offload", "offload")


def _print_status(c: Ctx, topic: str, status: dict[str, Any], title: str, noun: str) -> int:
    if c.output == "json":
        c.emit(status)
        return 1 if status.get("status") == "ERROR" else 0
    state = status.get("status")
    if state == "NOT_RUN":
        c.print(f"{title} has not been run for {topic} since broker startup")
    elif state == "RUNNING":
        c.print(f"{title} is currently running")
    elif state == "SUCCESS":
        c.print(f"{title} was a success")
    else:
        c.print(f"Error in {noun}")
        print(status.get("lastError", ""), file=c.err)
        return 1
    return 0


def first_ledger_to_keep(internal_stats: dict[str, Any], size_threshold: int) -> models.MessageId | None:
    """Walk ledgers newest first; once their sizes exceed the threshold, offload before the last one seen."""
    ledgers = list(internal_stats.get("ledgers") or [])
    if not ledgers:
        raise CliUsageError("topic doesn't have any data")
    sizes = [int(ledger.get("size", 0)) for ledger in ledgers]
    sizes[-1] = int(internal_stats.get("currentLedgerSize", sizes[-1]))
    suffix = 0
    previous = int(ledgers[-1]["ledgerId"])
    for ledger, size in zip(reversed(ledgers), reversed(sizes), strict=True):
        suffix += size
        if suffix > size_threshold:
            return models.MessageId(previous, 0, -1)
        previous = int(ledger["ledgerId"])
    return None


def _offload(c: Ctx, a: argparse.Namespace) -> None:
    mid = first_ledger_to_keep(c.admin.topics.get_internal_stats(a.topic) or {}, a.size_threshold)
    if mid is None:
        c.print("Nothing to offload")
        return
    c.admin.topics.trigger_offload(a.topic, mid)
    c.print(f"Offload triggered for {a.topic} for messages before {mid}")
