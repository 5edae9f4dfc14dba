"""``magnetar admin resourcegroups``: create/update/get/list/delete resource groups.

Theory of operation: each subcommand maps to one call of
``admin.resource_groups``; flag names are ``pulsar-admin``'s
(``--msg-publish-rate``/``-mp``, ``--byte-publish-rate``/``-bp``,
``--msg-dispatch-rate``/``-md``, ``--byte-dispatch-rate``/``-bd``; per
second for the whole cluster, -1: no limit).  ``create`` stores -1 for a
rate not given; ``update`` changes only the rates given.  A namespace joins
a group with ``namespaces set-resource-group``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from magnetar.cli.admin.common import Ctx, command

if TYPE_CHECKING:  # pydantic loads only when a body is built (see cli.main)
    from magnetar.common.rest_models import ResourceGroup

RATE_FLAGS = (
    ("--msg-publish-rate", "-mp", "publish_rate_in_msgs", "messages published per second"),
    ("--byte-publish-rate", "-bp", "publish_rate_in_bytes", "bytes published per second"),
    ("--msg-dispatch-rate", "-md", "dispatch_rate_in_msgs", "messages dispatched per second"),
    ("--byte-dispatch-rate", "-bd", "dispatch_rate_in_bytes", "bytes dispatched per second"),
)


def register(sub: argparse._SubParsersAction) -> None:
    command(
        sub,
        "list",
        "list the names of all resource groups",
        lambda c, a: c.emit(c.admin.resource_groups.list()),
    )
    p = command(
        sub,
        "get",
        "print a resource group's rates",
        lambda c, a: c.emit(c.admin.resource_groups.get(a.resourcegroup)),
    )
    _name(p)
    p = command(sub, "create", "create a resource group (rates not given: -1, no limit)", _create)
    _name(p)
    _rates(p)
    p = command(sub, "update", "change the given rates of a resource group", _update)
    _name(p)
    _rates(p)
    p = command(
        sub,
        "delete",
        "delete a resource group (no namespace may still use it)",
        lambda c, a: c.admin.resource_groups.delete(a.resourcegroup),
    )
    _name(p)


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument("resourcegroup", help="resource group name")


def _rates(p: argparse.ArgumentParser) -> None:
    for flag, short, dest, help_text in RATE_FLAGS:
        p.add_argument(flag, short, dest=dest, type=int, default=None, help=f"{help_text} (-1: no limit)")


def _body(a: argparse.Namespace) -> ResourceGroup:
    from magnetar.common.rest_models import ResourceGroup  # noqa: PLC0415

    return ResourceGroup(**{dest: getattr(a, dest) for _, _, dest, _ in RATE_FLAGS})


def _create(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.resource_groups.create(a.resourcegroup, _body(a))


def _update(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.resource_groups.update(a.resourcegroup, _body(a))
