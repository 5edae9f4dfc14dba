"""``magnetar admin namespaces``: lifecycle, permissions, bundles, backlog, properties, policies.

Theory of operation: lifecycle and bundle commands are written here with
``pulsar-admin``'s flags; every ``set-``/``get-``/``remove-`` policy command
comes from the shared table in ``policy_cmds`` at namespace level.
"""

from __future__ import annotations

import argparse

from magnetar.cli.admin.common import Ctx, command, csv, kv_map, ns_arg
from magnetar.cli.admin.policy_cmds import register_policy_commands


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub, "list", "list the namespaces of a tenant", lambda c, a: c.emit(c.admin.namespaces.list(a.tenant))
    )
    p.add_argument("tenant", help="tenant name")
    p = command(sub, "topics", "list the topics of a namespace", _topics)
    ns_arg(p)
    p.add_argument(
        "-td",
        "--topic-domain",
        choices=("persistent", "non_persistent"),
        help="only topics of this domain (default: all)",
    )
    p.add_argument("-ist", "--include-system-topic", action="store_true", help="include system topics")
    p = command(
        sub,
        "policies",
        "print the namespace's Policies JSON",
        lambda c, a: c.emit(c.admin.namespaces.get_policies(a.namespace)),
    )
    ns_arg(p)
    p = command(sub, "create", "create a namespace", _create)
    ns_arg(p)
    p.add_argument("-b", "--bundles", type=int, help="number of bundles (default: broker default, 4)")
    p.add_argument("-c", "--clusters", help="comma-separated replication clusters")
    p = command(
        sub,
        "delete",
        "delete a namespace (it must be empty unless --force)",
        lambda c, a: c.admin.namespaces.delete(a.namespace, force=a.force),
    )
    ns_arg(p)
    p.add_argument("-f", "--force", action="store_true", help="delete the namespace's topics too")
    _permissions(sub)
    _bundles(sub)
    _properties(sub)
    p = command(
        sub,
        "get-anti-affinity-namespaces",
        "list namespaces of an anti-affinity group",
        lambda c, a: c.emit(c.admin.namespaces.get_anti_affinity_namespaces(a.cluster, a.group, a.tenant)),
    )
    p.add_argument("-c", "--cluster", required=True, help="cluster name")
    p.add_argument("-g", "--group", required=True, help="anti-affinity group")
    p.add_argument("-p", "--tenant", help="tenant name")
    p = command(
        sub,
        "set-resource-group",
        "attach a resource group to the namespace",
        lambda c, a: c.admin.namespaces.set_resource_group(a.namespace, a.resource_group_name),
    )
    ns_arg(p)
    p.add_argument("-rgn", "--resource-group-name", required=True, help="resource group name")
    p = command(
        sub,
        "get-resource-group",
        "print the namespace's resource group",
        lambda c, a: c.emit(c.admin.namespaces.get_resource_group(a.namespace)),
    )
    ns_arg(p)
    p = command(
        sub,
        "remove-resource-group",
        "detach the namespace's resource group",
        lambda c, a: c.admin.namespaces.remove_resource_group(a.namespace),
    )
    ns_arg(p)
    register_policy_commands(sub, "ns", lambda c: c.admin.namespaces)


def _topics(c: Ctx, a: argparse.Namespace) -> None:
    mode = {"persistent": "PERSISTENT", "non_persistent": "NON_PERSISTENT", None: "ALL"}[a.topic_domain]
    c.emit(c.admin.namespaces.get_topics(a.namespace, mode=mode, include_system_topic=a.include_system_topic))


def _create(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.namespaces.create(a.namespace, bundles=a.bundles, clusters=csv(a.clusters) or None)


def _permissions(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "permissions",
        "print the namespace's permissions (role -> actions)",
        lambda c, a: c.emit(c.admin.namespaces.get_permissions(a.namespace)),
    )
    ns_arg(p)
    p = command(
        sub,
        "grant-permission",
        "grant actions on the namespace to a role",
        lambda c, a: c.admin.namespaces.grant_permission(a.namespace, a.role, csv(a.actions)),
    )
    ns_arg(p)
    p.add_argument("--role", required=True, help="client role")
    p.add_argument(
        "--actions", required=True, help="comma-separated: produce,consume,functions,sources,sinks,packages"
    )
    p = command(
        sub,
        "revoke-permission",
        "revoke a role's permissions on the namespace",
        lambda c, a: c.admin.namespaces.revoke_permission(a.namespace, a.role),
    )
    ns_arg(p)
    p.add_argument("--role", required=True, help="client role")
    p = command(
        sub,
        "subscription-permission",
        "print which roles may use which subscriptions",
        lambda c, a: c.emit(c.admin.namespaces.get_subscription_permissions(a.namespace)),
    )
    ns_arg(p)
    p = command(
        sub,
        "grant-subscription-permission",
        "allow roles to use a subscription",
        lambda c, a: c.admin.namespaces.grant_subscription_permission(
            a.namespace, a.subscription, csv(a.roles)
        ),
    )
    ns_arg(p)
    p.add_argument("--subscription", required=True, help="subscription name")
    p.add_argument("--roles", required=True, help="comma-separated client roles")
    p = command(
        sub,
        "revoke-subscription-permission",
        "revoke a role's access to a subscription",
        lambda c, a: c.admin.namespaces.revoke_subscription_permission(a.namespace, a.subscription, a.role),
    )
    ns_arg(p)
    p.add_argument("--subscription", required=True, help="subscription name")
    p.add_argument("--role", required=True, help="client role")


def _bundles(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "bundles",
        "print the namespace's bundle boundaries",
        lambda c, a: c.emit(c.admin.namespaces.get_bundles(a.namespace)),
    )
    ns_arg(p)
    p = command(
        sub,
        "unload",
        "unload the namespace (or one bundle) from its broker",
        lambda c, a: c.admin.namespaces.unload(
            a.namespace, bundle=a.bundle, destination_broker=a.destination_broker
        ),
    )
    ns_arg(p)
    p.add_argument("-b", "--bundle", help="bundle range, e.g. 0x00000000_0x40000000")
    p.add_argument(
        "-d", "--destinationBroker", dest="destination_broker", help="broker to move the bundle to"
    )
    p = command(
        sub,
        "split-bundle",
        "split a bundle in two",
        lambda c, a: c.admin.namespaces.split_bundle(
            a.namespace, a.bundle, unload=a.unload, split_algorithm_name=a.split_algorithm_name
        ),
    )
    ns_arg(p)
    p.add_argument("-b", "--bundle", required=True, help="bundle range, e.g. 0x00000000_0xffffffff")
    p.add_argument("-u", "--unload", action="store_true", help="unload the new bundles after splitting")
    p.add_argument(
        "-san",
        "--split-algorithm-name",
        choices=(
            "range_equally_divide",
            "topic_count_equally_divide",
            "specified_positions_divide",
            "flow_or_qps_equally_divide",
        ),
        help="split algorithm",
    )
    p = command(
        sub,
        "clear-backlog",
        "clear the backlog of all subscriptions (or one) in the namespace",
        lambda c, a: c.admin.namespaces.clear_backlog(a.namespace, bundle=a.bundle, subscription=a.sub),
    )
    ns_arg(p)
    p.add_argument("-b", "--bundle", help="only this bundle")
    p.add_argument("-s", "--sub", help="only this subscription")
    p.add_argument(
        "-force", "--force", action="store_true", help="do not ask for confirmation (never asked here)"
    )
    p = command(
        sub,
        "unsubscribe",
        "delete a subscription from every topic of the namespace",
        lambda c, a: c.admin.namespaces.unsubscribe(a.namespace, a.sub, bundle=a.bundle),
    )
    ns_arg(p)
    p.add_argument("-s", "--sub", required=True, help="subscription name")
    p.add_argument("-b", "--bundle", help="only this bundle")


def _properties(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "set-properties",
        "set (merge) namespace properties",
        lambda c, a: c.admin.namespaces.set_properties(a.namespace, kv_map(a.properties)),
    )
    ns_arg(p)
    p.add_argument("-p", "--properties", required=True, action="append", help="k1=v1,k2=v2 (repeatable)")
    p = command(
        sub,
        "get-properties",
        "print the namespace's properties",
        lambda c, a: c.emit(c.admin.namespaces.get_properties(a.namespace)),
    )
    ns_arg(p)
    p = command(
        sub,
        "get-property",
        "print one namespace property",
        lambda c, a: c.emit(c.admin.namespaces.get_property(a.namespace, a.key)),
    )
    ns_arg(p)
    p.add_argument("-k", "--key", required=True, help="property key")
    p = command(
        sub,
        "remove-property",
        "remove one namespace property",
        lambda c, a: c.admin.namespaces.remove_property(a.namespace, a.key),
    )
    ns_arg(p)
    p.add_argument("-k", "--key", required=True, help="property key")
    p = command(
        sub,
        "clear-properties",
        "remove all namespace properties",
        lambda c, a: c.admin.namespaces.clear_properties(a.namespace),
    )
    ns_arg(p)
