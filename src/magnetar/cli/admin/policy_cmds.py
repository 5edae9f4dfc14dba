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
from typing import Any

from magnetar.cli.admin.common import Ctx, command, ns_arg, topic_arg
from magnetar.cli.admin.policy_table import TABLE, PolicyCmd


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
