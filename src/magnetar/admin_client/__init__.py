"""magnetar.admin_client: a client of Pulsar's admin REST API (v2), sync and asyncio.

Theory of operation: resource families (clusters, tenants, namespaces, topics,
topic policies, brokers, bookies, schemas) describe requests as
``core.Call`` objects following ``pulsar-admin-rest.md``; :class:`PulsarAdmin`
runs them on ``httpx.Client`` and :class:`AsyncPulsarAdmin` on
``httpx.AsyncClient``.  Errors are typed by HTTP status (``errors``),
credentials come from small providers (``auth``), and request bodies can be
written with the models of ``models``.  It talks to any Pulsar-compatible
broker: Magnetar's or Apache Pulsar's.

    with PulsarAdmin("http://localhost:8080") as admin:
        admin.tenants.create("t", TenantInfo(allowed_clusters=("standalone",)))
        admin.namespaces.create("t/ns", bundles=4)
        admin.namespaces.set_retention("t/ns", RetentionPolicies(60, 100))
"""

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
from magnetar.admin_client.models import (
    EARLIEST,
    LATEST,
    AutoTopicCreationOverride,
    BacklogQuota,
    BacklogQuotaPolicy,
    BacklogQuotaType,
    ClusterData,
    DelayedDeliveryPolicies,
    DispatchRate,
    InactiveTopicPolicies,
    MessageId,
    PeekedMessage,
    PersistencePolicies,
    PublishRate,
    RetentionPolicies,
    SubscribeRate,
    TenantInfo,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "AdminConfig",
    "AdminConnectionError",
    "AdminError",
    "AsyncPulsarAdmin",
    "AuthProvider",
    "AutoTopicCreationOverride",
    "BacklogQuota",
    "BacklogQuotaPolicy",
    "BacklogQuotaType",
    "BadRequest",
    "BasicAuth",
    "ClusterData",
    "Conflict",
    "DelayedDeliveryPolicies",
    "DispatchRate",
    "InactiveTopicPolicies",
    "MessageId",
    "NotAllowed",
    "NotAuthorized",
    "NotFound",
    "PeekedMessage",
    "PersistencePolicies",
    "PreconditionFailed",
    "PublishRate",
    "PulsarAdmin",
    "RetentionPolicies",
    "ServerError",
    "SubscribeRate",
    "TenantInfo",
    "TlsAuth",
    "TlsOptions",
    "TokenAuth",
    "TooManyRequests",
    "auth_from_plugin",
]
