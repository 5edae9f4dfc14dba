"""``magnetar admin brokers``, ``broker-stats`` and ``bookies``.

Theory of operation: one call per subcommand, ``pulsar-admin``'s names:
``brokers list [cluster]``, ``leader-broker``, ``namespaces <cluster> --url``,
dynamic configuration (``update-dynamic-config --config K --value V``,
``delete-dynamic-config``, ``list-dynamic-config``, ``get-all-dynamic-config``,
``get-runtime-config``, ``get-internal-config``), ``healthcheck`` (prints
``ok``); ``broker-stats`` dumps (and Magnetar's ``load-decisions``: the load
manager's decisions with their reasons, ``--kind``/``--last`` to filter); ``bookies list-bookies`` and rack placement.
"""

from __future__ import annotations

import argparse
import json

from magnetar.cli.admin.common import Ctx, command


def register_brokers(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "list",
        "list the active brokers of a cluster (default: the local cluster)",
        lambda c, a: c.emit(c.admin.brokers.list(a.cluster)),
    )
    p.add_argument("cluster", nargs="?", help="cluster name")
    command(
        sub,
        "leader-broker",
        "print the leader broker",
        lambda c, a: c.emit(c.admin.brokers.get_leader_broker()),
    )
    p = command(
        sub,
        "namespaces",
        "print the namespace bundles a broker owns",
        lambda c, a: c.emit(c.admin.brokers.get_owned_namespaces(a.cluster, a.url)),
    )
    p.add_argument("cluster", help="cluster name")
    p.add_argument("--url", required=True, help="broker address host:port")
    p = command(
        sub,
        "update-dynamic-config",
        "set a dynamic broker setting (stored and pushed to all brokers)",
        lambda c, a: c.admin.brokers.update_dynamic_configuration(a.config, a.value),
    )
    p.add_argument("--config", required=True, help="setting name, e.g. maxUnackedMessagesPerConsumer")
    p.add_argument("--value", required=True, help="new value")
    p = command(
        sub,
        "delete-dynamic-config",
        "remove a dynamic setting override",
        lambda c, a: c.admin.brokers.delete_dynamic_configuration(a.config),
    )
    p.add_argument("--config", required=True, help="setting name")
    command(
        sub,
        "list-dynamic-config",
        "list the names of the settings that can be changed dynamically",
        lambda c, a: c.emit(c.admin.brokers.get_dynamic_config_names()),
    )
    command(
        sub,
        "get-all-dynamic-config",
        "print the dynamic setting overrides",
        lambda c, a: _emit_map(c, c.admin.brokers.get_all_dynamic_configurations()),
    )
    command(
        sub,
        "get-runtime-config",
        "print every effective broker setting",
        lambda c, a: _emit_map(c, c.admin.brokers.get_runtime_configurations()),
    )
    command(
        sub,
        "get-internal-config",
        "print the internal configuration (metadata store URLs ...)",
        lambda c, a: c.emit(c.admin.brokers.get_internal_configuration()),
    )
    p = command(
        sub,
        "healthcheck",
        "check that the broker can produce and read a message (prints ok)",
        lambda c, a: c.print(str(c.admin.brokers.health_check(a.topic_version)).strip()),
    )
    p.add_argument("-tv", "--topic-version", choices=("V1", "V2"), help="health-check topic naming version")
    command(
        sub,
        "backlog-quota-check",
        "run the backlog quota check now",
        lambda c, a: c.admin.brokers.backlog_quota_check(),
    )
    p = command(
        sub,
        "shutdown",
        "shut the broker down gracefully (unloads its bundles first)",
        lambda c, a: c.admin.brokers.shutdown(
            max_concurrent_unload_per_sec=a.max_concurrent_unload_per_sec,
            forced_terminate_topic=True if a.forced_terminate_topic else None,
        ),
    )
    p.add_argument("-m", "--max-concurrent-unload-per-sec", type=int, help="bundle unloads per second")
    p.add_argument("-f", "--forced-terminate-topic", action="store_true", help="terminate topics forcibly")
    command(
        sub,
        "version",
        "print the broker version",
        lambda c, a: c.print(str(c.admin.brokers.version()).strip()),
    )


def _emit_map(c: Ctx, value: object) -> None:
    """Maps print as ``key    value`` lines in text mode, as pulsar-admin does."""
    if c.output == "text" and isinstance(value, dict):
        for k, v in value.items():
            c.print(f"{k}    {v if isinstance(v, str) else json.dumps(v)}")
    else:
        c.emit(value)


def register_broker_stats(sub: argparse._SubParsersAction) -> None:
    for name, method, doc in (
        ("monitoring-metrics", "get_metrics", "print the broker's monitoring metrics"),
        ("mbeans", "get_mbeans", "print the broker's mbean metrics"),
        ("topics", "get_topics", "print stats of every topic on the broker, by namespace and bundle"),
        ("load-report", "get_load_report", "print the broker's load report"),
    ):
        p = command(sub, name, doc, lambda c, a, _m=method: c.emit(getattr(c.admin.broker_stats, _m)()))
        p.add_argument("-i", "--indent", action="store_true", help="indent the JSON (always indented here)")
    p = command(
        sub,
        "allocator-stats",
        "print buffer allocator stats",
        lambda c, a: c.emit(c.admin.broker_stats.get_allocator_stats(a.allocator)),
    )
    p.add_argument("allocator", help="allocator name, e.g. default")
    p = command(
        sub,
        "load-decisions",
        "print the load manager's decisions (placements, unloads, splits) and why",
        lambda c, a: _emit_decisions(c, c.admin.broker_stats.get_load_decisions(), a.kind, a.last),
    )
    p.add_argument("--kind", choices=("place", "unload", "split", "skip"), help="only decisions of this kind")
    p.add_argument("--last", type=int, help="only the N most recent decisions")


def _emit_decisions(c: Ctx, stats: object, kind: str | None, last: int | None) -> None:
    """Text mode: a summary line, the counters, then one line per decision (oldest first)."""
    if not isinstance(stats, dict):
        c.emit(stats)
        return
    decisions = [d for d in stats.get("decisions", []) if kind is None or d.get("kind") == kind]
    if last is not None:
        decisions = decisions[-last:] if last > 0 else []
    if c.output != "text":
        c.emit({**stats, "decisions": decisions})
        return
    c.print(f"leader: {str(bool(stats.get('leader'))).lower()}")
    for name, value in sorted((stats.get("counters") or {}).items()):
        c.print(f"{name}    {value}")
    for d in decisions:
        moved = (
            f" {d.get('source') or '-'} -> {d.get('destination') or '-'}" if d.get("kind") != "skip" else ""
        )
        c.print(f"{d.get('timestamp', 0)} {d.get('kind')} {d.get('bundle') or '-'}{moved}: {d.get('reason')}")


def register_bookies(sub: argparse._SubParsersAction) -> None:
    command(
        sub,
        "list-bookies",
        "list the registered bookies",
        lambda c, a: c.emit(c.admin.bookies.list_bookies()),
    )
    command(
        sub,
        "racks-placement",
        "print the rack placement of all bookies",
        lambda c, a: c.emit(c.admin.bookies.get_racks_info()),
    )
    p = command(
        sub,
        "get-bookie-rack",
        "print a bookie's rack",
        lambda c, a: c.emit(c.admin.bookies.get_bookie_rack(a.bookie)),
    )
    p.add_argument("-b", "--bookie", required=True, help="bookie address host:port")
    p = command(
        sub,
        "set-bookie-rack",
        "set a bookie's rack and hostname",
        lambda c, a: c.admin.bookies.set_bookie_rack(
            a.bookie, {"rack": a.rack, **({"hostname": a.hostname} if a.hostname else {})}, group=a.group
        ),
    )
    p.add_argument("-b", "--bookie", required=True, help="bookie address host:port")
    p.add_argument("-r", "--rack", required=True, help="rack name, e.g. /region/rack1")
    p.add_argument("-g", "--group", default="default", help="bookie group (default: default)")
    p.add_argument("--hostname", help="bookie hostname")
    p = command(
        sub,
        "delete-bookie-rack",
        "remove a bookie's rack placement",
        lambda c, a: c.admin.bookies.delete_bookie_rack(a.bookie),
    )
    p.add_argument("-b", "--bookie", required=True, help="bookie address host:port")
