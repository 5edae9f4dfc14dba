"""Which configuration keys Magnetar reads, and the one warning about the others.

Theory of operation: an operator's ``standalone.conf`` / ``broker.conf`` is one
flat ``key=value`` mapping, but every component types its own part of it once,
at start-up, into a frozen config object:

    BrokerConfig            broker.config          (its fields' Pulsar keys)
    AuthConfig              broker.auth.config     (authentication*, authorization*, token*, tls*)
    SchemaRegistryConfig    broker.schema.policies (schema* keys)
    TransactionConfig       broker.transaction.config (transaction* keys)
    LoadBalancerConfig      broker.loadbalance.config (loadBalancer* keys, loadManagerClassName)
    BookieConfig            bookie.config          (BookKeeper's bk_server.conf keys)
    ClientConfig            bookkeeper.config      (bookkeeperClient*, auto-recovery keys)
    ProxyConfig             proxy.config           (proxy.conf: PROXY_KEYS below)

A handful of settings are read straight from the broker's settings map by the
service that uses them (``BROKER_SERVICE_KEYS``; they stay in
``BrokerConfig.extra``, where plugins also find their keys) and a few by the
composition roots themselves (``ASSEMBLY_KEYS``).

:func:`known_keys` is the union of all of these, so :func:`unknown_keys` names
only what no part of Magnetar reads, and :func:`log_unknown_keys` says so in
ONE log line (a Pulsar config file names ~300 keys; a line per key drowned the
useful ones, and named keys Magnetar does use, such as ``authenticationEnabled``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping

# Read by broker services from the settings map (BrokerConfig.extra / as_properties()).
BROKER_SERVICE_KEYS = frozenset(
    {
        "delayedDeliveryEnabled",
        "delayedDeliveryTickTimeMillis",
        "magnetarDelayedDeliveryMaxIndexedMessages",
        "brokerDeleteInactiveTopicsMode",
        "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds",
        "subscriptionKeySharedUseConsistentHashing",
        "subscriptionKeySharedConsistentHashingReplicaPoints",
        "brokerServiceCompactionMonitorIntervalInSeconds",
        "brokerServiceCompactionThresholdInBytes",
        "topicCompactionRetainNullKey",
        "authenticateMetricsEndpoint",
        "magnetarPolicyCheckIntervalMs",
        "forceDeleteTenantAllowed",
        "forceDeleteNamespaceAllowed",
        "brokerClientAuthenticationPlugin",
        "brokerClientAuthenticationParameters",
        # geo-replication (broker.replication)
        "replicatorPrefix",
        "replicationProducerQueueSize",
        "dispatchThrottlingRatePerReplicatorInMsg",
        "dispatchThrottlingRatePerReplicatorInByte",
        "replicationMetricsEnabled",
        "magnetarReplicationPolicyCheckIntervalMs",
        "enableReplicatedSubscriptions",
        "replicatedSubscriptionsSnapshotFrequencyMillis",
        "replicatedSubscriptionsSnapshotTimeoutSeconds",
        # web: /metrics and the WebSocket API
        "exposeTopicLevelMetricsInPrometheus",
        "exposeConsumerLevelMetricsInPrometheus",
        "webSocketServiceEnabled",
        "webSocketSessionIdleTimeoutMillis",
        "webSocketMaxTextFrameSize",
        "magnetarAdminRoutesPreloadDelayMs",
    }
)

# Read by the standalone / broker assembly (app.config, app.storage).
ASSEMBLY_KEYS = frozenset(
    {
        "managedLedgerCacheSizeMB",
        "metadataStoreUrl",
        "configurationMetadataStoreUrl",
        # app.storage (cluster broker) and cli.broker: the metadata session and what its loss does
        "metadataStoreSessionTimeoutMillis",
        "zooKeeperSessionTimeoutMillis",
        "zookeeperSessionExpiredPolicy",
        "retentionCheckIntervalInSeconds",
        "functionsWorkerEnabled",
        "functionRuntime",
        "clientAuthenticationPlugin",
        "clientAuthenticationParameters",
    }
)

# Pulsar's proxy.conf keys ``magnetar proxy`` reads (magnetar.proxy.config types them; the
# security keys are the broker's, typed by broker.auth.AuthConfig).
PROXY_KEYS = frozenset(
    {
        "clusterName",
        "metadataStoreUrl",
        "configurationMetadataStoreUrl",
        "zookeeperServers",
        "metadataStoreSessionTimeoutMillis",
        "brokerServiceURL",
        "brokerWebServiceURL",
        "bindAddress",
        "advertisedAddress",
        "servicePort",
        "webServicePort",
        "maxConcurrentInboundConnections",
        "maxConcurrentLookupRequests",
        "brokerProxyAllowedTargetPorts",
        "brokerClientConnectTimeoutMs",
        "maxMessageSize",
        "forwardAuthorizationCredentials",
        "brokerClientAuthenticationPlugin",
        "brokerClientAuthenticationParameters",
        "authenticationEnabled",
        "authenticationProviders",
        "authenticationRefreshCheckSeconds",
        "authorizationEnabled",
        "superUserRoles",
        "proxyRoles",
        "anonymousUserRole",
        "tokenSecretKey",
        "tokenPublicKey",
        "tokenPublicAlg",
        "tokenAuthClaim",
        "tokenAudienceClaim",
        "tokenAudience",
        "basicAuthConf",
    }
)


def known_keys() -> frozenset[str]:
    """Every configuration key some part of Magnetar reads."""
    from magnetar.app.config import STANDALONE_DEFAULTS
    from magnetar.bookie.config import BK_KEYS
    from magnetar.bookkeeper.config import KNOWN_KEYS as CLIENT_KEYS
    from magnetar.broker.auth.config import KNOWN_KEYS as AUTH_KEYS
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.loadbalance.config import KNOWN_KEYS as LB_KEYS
    from magnetar.broker.plugins import GROUPS as PLUGIN_KEYS
    from magnetar.broker.schema.policies import KNOWN_KEYS as SCHEMA_KEYS
    from magnetar.broker.transaction.config import KNOWN_KEYS as TXN_KEYS

    broker = {f.metadata["key"] for f in dataclasses.fields(BrokerConfig) if f.metadata.get("key")}
    return frozenset(
        broker
        | set(AUTH_KEYS)
        | set(SCHEMA_KEYS)
        | TXN_KEYS
        | LB_KEYS
        | set(BK_KEYS.values())
        | set(CLIENT_KEYS)
        | set(PLUGIN_KEYS)
        | set(STANDALONE_DEFAULTS)
        | BROKER_SERVICE_KEYS
        | ASSEMBLY_KEYS
    )


def unknown_keys(keys: Iterable[str], known: frozenset[str] | None = None) -> list[str]:
    known = known_keys() if known is None else known
    return sorted(set(keys) - known)


def log_unknown_keys(
    props: Mapping[str, str], logger: logging.Logger, what: str = "configuration"
) -> list[str]:
    """One line naming every key nobody reads (kept for plugins); nothing when there are none."""
    unknown = unknown_keys(props)
    if unknown:
        logger.warning(
            "%d %s keys are not used by Magnetar (kept for plugins): %s",
            len(unknown),
            what,
            ", ".join(unknown),
        )
    return unknown
