"""``magnetar admin tenants``: list/get/create/update/delete.

Theory of operation: like ``pulsar-admin tenants``: ``create`` without
``--allowed-clusters`` allows every existing cluster (one extra GET of the
cluster list), ``update`` keeps the fields it is not given (GET, merge, POST).
"""

from __future__ import annotations

import argparse

from magnetar.admin_client import models
from magnetar.cli.admin.common import Ctx, command, csv


def register(sub: argparse._SubParsersAction) -> None:
    command(sub, "list", "list tenant names", lambda c, a: c.emit(c.admin.tenants.list()))
    p = command(sub, "get", "print a tenant's TenantInfo", lambda c, a: c.emit(c.admin.tenants.get(a.tenant)))
    _tenant(p)
    for name, run in (("create", _create), ("update", _update)):
        p = command(sub, name, f"{name} a tenant", run)
        _tenant(p)
        p.add_argument("-r", "--admin-roles", help="comma-separated roles that administer the tenant")
        p.add_argument(
            "-c",
            "--allowed-clusters",
            help="comma-separated clusters the tenant may use"
            + (" (default: all clusters)" if name == "create" else ""),
        )
    p = command(
        sub,
        "delete",
        "delete a tenant (it must have no namespaces unless --force)",
        lambda c, a: c.admin.tenants.delete(a.tenant, force=a.force),
    )
    _tenant(p)
    p.add_argument("-f", "--force", action="store_true", help="delete the tenant's namespaces too")


def _tenant(p: argparse.ArgumentParser) -> None:
    p.add_argument("tenant", help="tenant name")


def _create(c: Ctx, a: argparse.Namespace) -> None:
    clusters = (
        csv(a.allowed_clusters) if a.allowed_clusters is not None else list(c.admin.clusters.list() or [])
    )
    c.admin.tenants.create(a.tenant, models.TenantInfo(tuple(csv(a.admin_roles)), tuple(clusters)))


def _update(c: Ctx, a: argparse.Namespace) -> None:
    current = models.TenantInfo.from_json(c.admin.tenants.get(a.tenant) or {})
    roles = tuple(csv(a.admin_roles)) if a.admin_roles is not None else current.admin_roles
    clusters = tuple(csv(a.allowed_clusters)) if a.allowed_clusters is not None else current.allowed_clusters
    c.admin.tenants.update(a.tenant, models.TenantInfo(roles, clusters))
