"""``magnetar admin clusters``: list/get/create/update/delete, peer clusters, failure domains.

Theory of operation: each subcommand maps to one call of
``admin.clusters``; flag names are ``pulsar-admin``'s (``--url``,
``--broker-url``, ``--peer-clusters``, ``--domain-name``, ``--broker-list``).
"""

from __future__ import annotations

import argparse

from magnetar.admin_client import models
from magnetar.cli.admin.common import Ctx, command, csv, kv_map


def register(sub: argparse._SubParsersAction) -> None:
    command(sub, "list", "list the names of all clusters", lambda c, a: c.emit(c.admin.clusters.list()))
    p = command(
        sub, "get", "print the ClusterData of a cluster", lambda c, a: c.emit(c.admin.clusters.get(a.cluster))
    )
    _cluster(p)
    for name, verb in (("create", "create a new cluster"), ("update", "update (replace) a cluster's data")):
        p = command(sub, name, verb, _create if name == "create" else _update)
        _cluster(p)
        _cluster_data_flags(p)
    p = command(
        sub,
        "delete",
        "delete a cluster (it must not be used by any tenant or namespace)",
        lambda c, a: c.admin.clusters.delete(a.cluster),
    )
    _cluster(p)
    p = command(
        sub,
        "get-peer-clusters",
        "print a cluster's peer clusters",
        lambda c, a: c.emit(c.admin.clusters.get_peer_clusters(a.cluster)),
    )
    _cluster(p)
    p = command(
        sub,
        "update-peer-clusters",
        "set a cluster's peer clusters",
        lambda c, a: c.admin.clusters.update_peer_clusters(a.cluster, csv(a.peer_clusters)),
    )
    _cluster(p)
    p.add_argument("--peer-clusters", required=True, help="comma-separated peer cluster names")
    p = command(
        sub,
        "list-failure-domains",
        "list a cluster's failure domains",
        lambda c, a: c.emit(c.admin.clusters.list_failure_domains(a.cluster)),
    )
    _cluster(p)
    p = command(
        sub,
        "get-failure-domain",
        "print one failure domain",
        lambda c, a: c.emit(c.admin.clusters.get_failure_domain(a.cluster, a.domain_name)),
    )
    _cluster(p)
    p.add_argument("--domain-name", required=True, help="failure domain name")
    for name in ("create-failure-domain", "update-failure-domain"):
        p = command(
            sub,
            name,
            f"{name.split('-')[0]} a failure domain (a group of brokers)",
            lambda c, a: c.admin.clusters.set_failure_domain(a.cluster, a.domain_name, csv(a.broker_list)),
        )
        _cluster(p)
        p.add_argument("--domain-name", required=True, help="failure domain name")
        p.add_argument("--broker-list", required=True, help="comma-separated brokers (host:port)")
    p = command(
        sub,
        "delete-failure-domain",
        "delete a failure domain",
        lambda c, a: c.admin.clusters.delete_failure_domain(a.cluster, a.domain_name),
    )
    _cluster(p)
    p.add_argument("--domain-name", required=True, help="failure domain name")


def _cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("cluster", help="cluster name")


def _cluster_data_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="service URL (http://host:8080)")
    p.add_argument("--url-secure", help="TLS service URL (https://host:8443)")
    p.add_argument("--broker-url", help="broker service URL (pulsar://host:6650)")
    p.add_argument("--broker-url-secure", help="TLS broker service URL (pulsar+ssl://host:6651)")
    p.add_argument("--proxy-url", help="proxy service URL for SNI routing")
    p.add_argument("--proxy-protocol", choices=("SNI",), help="proxy protocol")
    p.add_argument("--listener-name", help="advertised listener to use for this cluster")


def _data(a: argparse.Namespace) -> models.ClusterData:
    return models.ClusterData(
        service_url=a.url,
        service_url_tls=a.url_secure,
        broker_service_url=a.broker_url,
        broker_service_url_tls=a.broker_url_secure,
        proxy_service_url=a.proxy_url,
        proxy_protocol=a.proxy_protocol,
        listener_name=a.listener_name,
    )


def _create(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.clusters.create(a.cluster, _data(a))


def _update(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.clusters.update(a.cluster, _data(a))


def register_ns_isolation(sub: argparse._SubParsersAction) -> None:
    """``ns-isolation-policy``: which brokers may serve which namespaces."""
    p = command(sub, "set", "create or update a namespace isolation policy", _set_isolation)
    _cluster(p)
    p.add_argument("policy", help="policy name")
    p.add_argument("--namespaces", required=True, help="comma-separated namespace regexes")
    p.add_argument("--primary", required=True, help="comma-separated primary broker regexes")
    p.add_argument("--secondary", help="comma-separated secondary broker regexes")
    p.add_argument(
        "--auto-failover-policy-type", default="min_available", help="failover policy type (min_available)"
    )
    p.add_argument(
        "--auto-failover-policy-params",
        required=True,
        help="comma-separated k=v, e.g. min_limit=1,usage_threshold=80",
    )
    for name, doc, fn in (
        (
            "get",
            "print a namespace isolation policy",
            lambda c, a: c.emit(c.admin.clusters.get_namespace_isolation_policy(a.cluster, a.policy)),
        ),
        (
            "delete",
            "delete a namespace isolation policy",
            lambda c, a: c.admin.clusters.delete_namespace_isolation_policy(a.cluster, a.policy),
        ),
    ):
        p = command(sub, name, doc, fn)
        _cluster(p)
        p.add_argument("policy", help="policy name")
    p = command(
        sub,
        "list",
        "list the namespace isolation policies of a cluster",
        lambda c, a: c.emit(c.admin.clusters.list_namespace_isolation_policies(a.cluster)),
    )
    _cluster(p)
    p = command(
        sub,
        "brokers",
        "list brokers with the isolation policies that apply to them",
        lambda c, a: c.emit(c.admin.clusters.get_brokers_with_namespace_isolation_policy(a.cluster)),
    )
    _cluster(p)
    p = command(
        sub,
        "broker",
        "print the isolation policies that apply to one broker",
        lambda c, a: c.emit(c.admin.clusters.get_broker_with_namespace_isolation_policy(a.cluster, a.broker)),
    )
    _cluster(p)
    p.add_argument("--broker", required=True, help="broker address host:port")


def _set_isolation(c: Ctx, a: argparse.Namespace) -> None:
    data = {
        "namespaces": csv(a.namespaces),
        "primary": csv(a.primary),
        "secondary": csv(a.secondary),
        "auto_failover_policy": {
            "policy_type": a.auto_failover_policy_type,
            "parameters": kv_map(a.auto_failover_policy_params),
        },
    }
    c.admin.clusters.set_namespace_isolation_policy(a.cluster, a.policy, data)
