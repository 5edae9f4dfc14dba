"""BrokerService: the broker's composition of listener, connections, topics and resources.

Theory of operation: one BrokerService per broker process.  It owns the
binary-protocol listener (``serve``), the set of live connections, the topic
registry and the typed metadata resources, and exposes the operations the
HTTP layer needs (lookup, partitioned metadata, topic admin, stats -- see
``magnetar.broker``'s docstring for the list).  Its dependencies come in
through the constructor: configuration, metadata store, managed-ledger
factory, clock and rng.

Lifecycle::

    NEW --serve()/start()--> RUNNING --aclose()--> CLOSED

``start`` is idempotent and creates the cluster, tenant ``public`` and the
namespaces ``public/default`` and ``pulsar/system`` when absent (after
``serve``, so the cluster record carries the bound port).  ``aclose`` stops
accepting, closes every connection (their producers and consumers detach),
then closes every topic and with it the managed ledgers.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any

from magnetar.broker import errors
from magnetar.broker.auth import AuthConfig, AuthorizationService
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.tls import server_ssl_context_from_config
from magnetar.broker.config import BrokerConfig
from magnetar.broker.interceptors import InterceptorChain
from magnetar.broker.ownership.api import LookupResult, NamespaceService
from magnetar.broker.ownership.local import LocalNamespaceService
from magnetar.broker.replication.service import ReplicationService
from magnetar.broker.resources import BrokerResources, initialize_cluster
from magnetar.broker.schema import SchemaRegistry, SchemaRegistryConfig
from magnetar.broker.service.admin import TopicAdmin
from magnetar.broker.service.compacted_dispatch import BrokerCompaction
from magnetar.broker.service.connection import Connection
from magnetar.broker.service.inactive_topics import max_inactive_ms, retire_inactive_topic
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.policy_documents import PolicyDocuments
from magnetar.broker.service.rates import sample_topic
from magnetar.broker.service.resource_groups import ResourceGroupService
from magnetar.broker.service.topic_list import TopicListWatchers
from magnetar.broker.service.topics import TopicRegistry
from magnetar.broker.transaction.config import TransactionConfig
from magnetar.broker.transaction.service import TransactionService
from magnetar.managed_ledger.api import ManagedLedgerFactory
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.runtime import Clock, Rng, TaskSupervisor, wait_for

log = logging.getLogger(__name__)

PRODUCER_NAME_COUNTER_PATH = "/counters/producer-name"
CLOSE_TIMEOUT_S = 10.0


class BrokerService(TopicAdmin):
    def __init__(
        self,
        config: BrokerConfig,
        metadata_store: MetadataStore,
        ml_factory: ManagedLedgerFactory,
        clock: Clock,
        rng: Rng,
        extensions: Any = None,
        namespace_service: Callable[[BrokerService], NamespaceService] | None = None,
    ) -> None:
        """``extensions``: broker.plugins.BrokerExtensions (interceptors, auth plugins) or None.
        ``namespace_service``: builds the bundle-ownership service (the composition root chooses:
        ``ClusterNamespaceService`` for ``magnetar broker``); None = the standalone's, which owns
        every bundle."""
        self.config = config
        # None unless brokerInterceptors is set: each hook site tests this and calls nothing.
        self.interceptor: InterceptorChain | None = getattr(extensions, "interceptor", None)
        self.metadata_store = metadata_store
        self.ml_factory = ml_factory
        self.clock = clock
        self.rng = rng
        self.supervisor = TaskSupervisor("broker")
        # Namespace policies through a watched cache (lookups and topic loads read them often).
        self.resources = BrokerResources(metadata_store, cached=hasattr(metadata_store, "add_listener"))
        # The topic-policy and namespace documents, cached and watched: read by the admin
        # layer's policy enforcer and the replication check (None: a store without watches).
        self.policy_documents: PolicyDocuments | None = (
            PolicyDocuments(metadata_store) if hasattr(metadata_store, "add_listener") else None
        )
        self.auth_config = AuthConfig.from_properties(config.as_properties())
        self.authentication = AuthenticationService.from_config(
            self.auth_config, clock, extra_providers=getattr(extensions, "authentication_providers", None)
        )
        self.authorization = AuthorizationService(self.auth_config, metadata_store)
        self.authorization.provider = getattr(extensions, "authorization_provider", None)
        self.schemas = SchemaRegistry(
            metadata_store, clock, SchemaRegistryConfig.from_properties(config.as_properties())
        )
        self.topics = TopicRegistry(self)
        self.topic_list_watchers = TopicListWatchers(self)
        self.compaction = BrokerCompaction(self)
        self.replication = ReplicationService(self)
        # resource groups: one limiter per group, shared by its namespaces' topics
        self.resource_groups = ResourceGroupService(metadata_store, clock, config)
        # Transactions (broker.transaction): None unless transactionCoordinatorEnabled=true.
        txn_config = TransactionConfig.from_properties(config.as_properties())
        self.transactions: TransactionService | None = (
            TransactionService(self, txn_config) if txn_config.enabled else None
        )
        self.connections: set[Connection] = set()
        # Cumulative counts for /metrics: connections_created/closed, lookup_answers/failures,
        # lookup_latency_ms (sum); one dict, plain integer adds.
        self.counters: collections.Counter[str] = collections.Counter()
        self.broker_port = config.broker_service_port
        self.web_port = config.web_service_port
        self._server: asyncio.Server | None = None
        self._tls_server: asyncio.Server | None = None
        self.broker_port_tls: int | None = None
        self.web_port_tls: int | None = None
        self.namespace_service: NamespaceService = (namespace_service or LocalNamespaceService)(self)
        self._started = False
        self._closed = False
        self._producer_name_prefix: str | None = None
        self._producer_counter = 0

    # ------------------------------------------------------------ lifecycle
    async def serve(self, host: str | None = None, port: int | None = None) -> asyncio.Server:
        host = host or self.config.bind_address
        port = self.config.broker_service_port if port is None else port
        self._server = await asyncio.start_server(self.handle_connection, host, port, limit=2**20)
        sock = self._server.sockets[0]
        self.broker_port = sock.getsockname()[1]
        return self._server

    async def serve_tls(self, host: str | None = None, port: int | None = None) -> asyncio.Server:
        """The TLS binary listener (``brokerServicePortTls`` and the tls* keys); clients use
        ``pulsar+ssl://``.  Raises AuthConfigError when the TLS settings are incomplete."""
        ctx = server_ssl_context_from_config(self.auth_config)
        host = host or self.config.bind_address
        port = self.auth_config.broker_service_port_tls if port is None else port
        server = await asyncio.start_server(self.handle_connection, host, port or 0, ssl=ctx, limit=2**20)
        self._tls_server = server
        self.broker_port_tls = server.sockets[0].getsockname()[1]
        return server

    def set_web_service_port(self, port: int) -> None:
        self.web_port = port

    def set_web_service_port_tls(self, port: int | None) -> None:
        self.web_port_tls = port

    async def start(self) -> None:
        if self._started:
            return
        await initialize_cluster(
            self.resources,
            self.config.cluster_name,
            self.web_service_url(),
            self.broker_service_url(),
            self.config.default_number_of_namespace_bundles,
            # a cluster's brokers leave its registered URLs alone (every broker, set at
            # initialize-cluster-metadata or by an operator); a standalone's port may change
            refresh_urls=isinstance(self.namespace_service, LocalNamespaceService),
        )
        if self._producer_name_prefix is None:
            self._producer_name_prefix = await self._allocate_name_prefix()
        self.supervisor.spawn(self._sample_rates(), name="stats-sampler")
        self.compaction.start()
        self.supervisor.spawn(self.replication.run(), name="replication-policy-check")
        self.supervisor.spawn(self.resource_groups.run(), name="resource-groups")
        self.supervisor.spawn(self.replication.run_snapshots(), name="replicated-subscriptions")
        if self.transactions is not None:
            await self.transactions.start()
        if self.config.broker_delete_inactive_topics_enabled:
            self.supervisor.spawn(self._unload_idle_topics(), name="idle-topics")
        await self.namespace_service.start()  # registers the broker; bundles are taken on lookup
        self._started = True

    async def _unload_idle_topics(self) -> None:
        """Retire topics nobody used for a whole check interval: deleted when
        ``brokerDeleteInactiveTopicsMode`` allows (as Pulsar does), otherwise unloaded
        (see :mod:`inactive_topics`)."""
        interval_s = max(1, self.config.broker_delete_inactive_topics_frequency_seconds)
        while True:
            await self.clock.sleep(interval_s)
            now_ms = self.clock.time_ms()
            for topic in self.topics.loaded():
                if topic.active and topic.idle_since_ms(now_ms) >= max_inactive_ms(self.config):
                    await retire_inactive_topic(self, topic)

    async def _sample_rates(self) -> None:
        interval_s = max(1, self.config.stats_update_frequency_in_secs)
        last = self.clock.monotonic()
        while True:
            await self.clock.sleep(interval_s)
            now = self.clock.monotonic()
            for topic in self.topics.loaded():
                sample_topic(topic, now - last)
                self.replication.sample(topic, now - last)
            last = now

    async def _allocate_name_prefix(self) -> str:
        try:
            stat = await self.metadata_store.put(
                f"{PRODUCER_NAME_COUNTER_PATH}/-", b"", ephemeral=True, sequential=True
            )
            return f"{self.config.cluster_name}-{int(stat.path.rsplit('-', 1)[-1])}"
        except MetadataError:
            log.warning("could not allocate a producer-name prefix; using a random one", exc_info=True)
            return f"{self.config.cluster_name}-{self.rng.randint(1000, 999_999)}"

    def new_producer_name(self) -> str:
        prefix = self._producer_name_prefix or f"{self.config.cluster_name}-{self.rng.randint(1000, 999_999)}"
        self._producer_name_prefix = prefix
        n = self._producer_counter
        self._producer_counter += 1
        return f"{prefix}-{n}"

    async def handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closed:
            writer.close()
            return
        refused = self._connection_refused(writer)
        if refused:
            self.counters["connections_rejected"] += 1
            log.warning("connection from %s refused: %s", writer.get_extra_info("peername"), refused)
            writer.close()
            return
        cnx = Connection(self, reader, writer)
        self.connections.add(cnx)
        self.counters["connections_created"] += 1
        if self.interceptor is not None:
            self.interceptor.on_connection_created(cnx)
        await cnx.run()

    def _connection_refused(self, writer: asyncio.StreamWriter) -> str | None:
        """Why a new connection is over ``brokerMaxConnections``/``brokerMaxConnectionsPerIp``."""
        cfg = self.config
        limit, per_ip = cfg.broker_max_connections, cfg.broker_max_connections_per_ip
        if limit and len(self.connections) >= limit:
            return f"brokerMaxConnections ({limit}) reached"
        if per_ip:
            ip = (writer.get_extra_info("peername") or ("",))[0]
            same = sum(1 for c in self.connections if (c.writer.get_extra_info("peername") or ("",))[0] == ip)
            if same >= per_ip:
                return f"brokerMaxConnectionsPerIp ({per_ip}) reached for {ip}"
        return None

    def connection_closed(self, cnx: Connection) -> None:
        if cnx in self.connections:
            self.counters["connections_closed"] += 1
            if self.interceptor is not None:
                self.interceptor.on_connection_closed(cnx)
        self.connections.discard(cnx)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for server in (self._server, self._tls_server):
            if server is not None:
                server.close()
        try:  # in a cluster: leave the broker list and hand every bundle over first
            await wait_for(self.clock, self.namespace_service.prepare_shutdown(), CLOSE_TIMEOUT_S * 3)
        except Exception:
            log.exception("handing the bundles over failed; they move when the session ends")
        for cnx in list(self.connections):
            try:
                await wait_for(self.clock, cnx.close(), CLOSE_TIMEOUT_S)
            except Exception:
                log.debug("closing connection failed", exc_info=True)
        await self.compaction.aclose()
        if self.transactions is not None:
            await self.transactions.aclose()
        try:
            await wait_for(self.clock, self.topics.close_all(), CLOSE_TIMEOUT_S * 3)
        except Exception:
            log.exception("closing topics failed")
        try:  # the topics are closed: now the bundles may go to other brokers
            await wait_for(self.clock, self.namespace_service.aclose(), CLOSE_TIMEOUT_S)
        except Exception:
            log.exception("releasing bundle ownership failed")
        await self.supervisor.aclose()
        if self.policy_documents is not None:
            await self.policy_documents.aclose()
        await self.resources.aclose()
        try:
            await self.authentication.aclose()
        except Exception:
            log.debug("closing the authentication service failed", exc_info=True)
        if self._server is not None:
            try:
                await wait_for(self.clock, self._server.wait_closed(), CLOSE_TIMEOUT_S)
            except Exception:
                pass

    def statistics(self) -> dict[str, int]:
        topics = self.topics.loaded()
        return {
            "connections": len(self.connections),
            "topics": len(topics),
            "producers": sum(len(t.producers) for t in topics),
            "subscriptions": sum(len(t.subscriptions) for t in topics),
            "consumers": sum(len(s.consumers) for t in topics for s in t.subscriptions.values()),
        }

    # ------------------------------------------------------------ addresses
    def broker_service_url(self, listener: str | None = None) -> str:
        return f"pulsar://{self.config.advertised_address}:{self.broker_port}"

    def broker_service_url_tls(self) -> str | None:
        if self.broker_port_tls is None:
            return None
        return f"pulsar+ssl://{self.config.advertised_address}:{self.broker_port_tls}"

    def web_service_url(self) -> str:
        return f"http://{self.config.advertised_address}:{self.web_port}"

    def web_service_url_tls(self) -> str | None:
        if self.web_port_tls is None:
            return None
        return f"https://{self.config.advertised_address}:{self.web_port_tls}"

    def listener_names(self) -> set[str]:
        names = set()
        for item in self.config.advertised_listeners.split(","):
            name, sep, _ = item.strip().partition(":")
            if sep and name:
                names.add(name)
        return names

    # ------------------------------------------------------------ lookup
    async def require_namespace(self, namespace: str) -> None:
        if not await self.resources.namespaces.exists(namespace):
            raise errors.NamespaceNotFoundError("Namespace does not exist")

    async def lookup(self, topic: str, authoritative: bool = False) -> dict:
        """Pulsar's LookupData of the topic's owner (this broker in a standalone)."""
        return (await self.lookup_topic(topic, authoritative)).as_lookup_data()

    async def lookup_topic(self, topic: str, authoritative: bool = False) -> LookupResult:
        """Who serves ``topic``: Connect here, or Redirect to the bundle's owner (see
        :mod:`magnetar.broker.ownership.cluster`); counted for /metrics."""
        t0 = self.clock.monotonic()
        try:
            answer = await self.namespace_service.lookup(parse_topic(topic), authoritative)
        except Exception:
            self.counters["lookup_failures"] += 1
            raise
        self.counters["lookup_answers"] += 1
        self.counters["lookup_latency_ms"] += (self.clock.monotonic() - t0) * 1000
        return answer
