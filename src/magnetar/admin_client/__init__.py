"""magnetar.admin_client: a client of Pulsar's admin REST API (v2), sync and asyncio.

Theory of operation: resource families (clusters, tenants, namespaces, topics,
topic policies, brokers, bookies, schemas) describe requests as
``core.Call`` objects following ``pulsar-admin-rest.md``; :class:`PulsarAdmin`
runs them on ``httpx.Client`` and :class:`AsyncPulsarAdmin` on
``httpx.AsyncClient``.  Errors are typed by HTTP status (``errors``),
credentials come from small providers (``auth``), and request bodies can be
written with the models of ``models`` (imported on first use of one of their
names, so that importing the client stays cheap).  It talks to any Pulsar-compatible
broker: Magnetar's or Apache Pulsar's.

    with PulsarAdmin("http://localhost:8080") as admin:
        admin.tenants.create("t", TenantInfo(allowed_clusters=("standalone",)))
        admin.namespaces.create("t/ns", bundles=4)
        admin.namespaces.set_retention("t/ns", RetentionPolicies(60, 100))
"""

from typing import Any

from magnetar.admin_client import models
from magnetar.admin_client.auth import AuthProvider, BasicAuth, TlsAuth, TokenAuth, auth_from_plugin
from magnetar.admin_client.client import AsyncPulsarAdmin, PulsarAdmin
from magnetar.admin_client.core import AdminConfig, TlsOptions
from magnetar.admin_client.errors import (
    AdminConnectionError,
    AdminError,
    BadRequest,
    Conflict,
    NotAllowed,
    NotAuthorized,
    NotFound,
    PreconditionFailed,
    ServerError,
    TooManyRequests,
)

__all__ = [
    "AdminConfig",
    "AdminConnectionError",
    "AdminError",
    "AsyncPulsarAdmin",
    "AuthProvider",
    "BadRequest",
    "BasicAuth",
    "Conflict",
    "NotAllowed",
    "NotAuthorized",
    "NotFound",
    "PreconditionFailed",
    "PulsarAdmin",
    "ServerError",
    "TlsAuth",
    "TlsOptions",
    "TokenAuth",
    "TooManyRequests",
    "auth_from_plugin",
    *models.__all__,  # the bodies, imported on first use (see __getattr__)
]


def __getattr__(name: str) -> Any:
    """The body classes, imported on first use: ``import magnetar.admin_client`` (and so
    ``magnetar admin``) does not import pydantic and build every model."""
    if name in models.__all__:
        value = getattr(models, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
