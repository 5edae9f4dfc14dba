"""The narrow faces of the broker's live objects: ``Topic``, ``Subscription``, ``Connection``.

Theory of operation: code outside a class talks to it through one of these
protocols, not through the concrete class and not through ``Any``.  They name
what the rest of the broker may rely on -- handlers, the admin layer's policy
enforcer and topic operations, stats -- and nothing else, so a second
implementation (``NonPersistentTopic`` beside ``PersistentTopic``, a test
fake, a future segment topic) knows exactly what it must provide.  Both topic
kinds share ``topic_base.BaseTopic``; what a topic stores is asked through
the storage facts (``terminated``, ``stored_cursors``, ``number_of_entries``,
``storage_size``, ``internal_stats``), never through its managed ledger.  The
protocols carry no state: each field named here is declared by the
implementing class (``tests/unit/broker/test_house_no_foreign_setattr.py``
keeps anyone else from adding fields).

``tests/unit/broker/test_house_protocols.py`` checks that both topic kinds,
both subscription kinds and the connection provide every member.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from magnetar.broker.service.names import TopicRef
from magnetar.broker.service.policies import TopicPolicies
from magnetar.managed_ledger.api import Position
from magnetar.runtime import Clock

if TYPE_CHECKING:
    from magnetar.broker.ownership.api import NamespaceService
    from magnetar.broker.service.consumer import Consumer
    from magnetar.broker.service.producer import Producer


@runtime_checkable
class Connection(Protocol):
    """What producers, consumers and dispatchers need of the client connection."""

    peer_address: str
    closed: bool

    @property
    def writable(self) -> bool: ...

    def send_message(
        self,
        consumer_id: int,
        pos: Position,
        partition: int,
        data: bytes,
        redelivery_count: int,
        ack_set: list[int] | None = None,
    ) -> None: ...

    def send_receipt(
        self, producer: Producer, sequence_id: int, highest: int | None, pos: Position
    ) -> None: ...

    def publish_failed(self, producer: Producer, sequence_id: int, exc: BaseException) -> None: ...

    def publish_abandoned(self) -> None: ...

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None: ...

    def broker_closed_producer(self, producer: Producer) -> None: ...

    def broker_closed_consumer(self, consumer: Consumer) -> None: ...

    def pause_reading(self, delay_s: float) -> None: ...

    async def check_liveness(self, timeout_s: float) -> bool: ...


@runtime_checkable
class Subscription(Protocol):
    """A named subscription of a topic: its consumers and its stats."""

    name: str
    durable: bool
    sub_type: int | None
    closed: bool

    @property
    def consumers(self) -> Sequence[Consumer]: ...

    def add_consumer(self, consumer: Consumer) -> None: ...

    def remove_consumer(self, consumer: Consumer) -> None: ...

    async def close(self) -> None: ...

    def to_stats(self) -> dict: ...


@runtime_checkable
class Topic(Protocol):
    """A loaded topic, persistent or not: producers, subscriptions, policies, lifecycle."""

    ref: TopicRef
    name: str
    clock: Clock
    policies: TopicPolicies
    producers: dict[str, Producer]
    subscriptions: Mapping[str, Any]  # name -> Subscription
    dedup: Any  # MessageDeduplication, or None (always None when nothing is stored)
    txn_buffer: Any  # TransactionBuffer, or None (always None when nothing is stored)
    replicators: Mapping[str, Any]  # remote cluster -> Replicator (empty when nothing is stored)

    @property
    def active(self) -> bool: ...

    @property
    def terminated(self) -> bool: ...

    @property
    def stored_cursors(self) -> Mapping[str, Any]: ...  # subscription name -> cursor in storage

    @property
    def number_of_entries(self) -> int: ...

    @property
    def storage_size(self) -> int: ...

    def internal_stats(self) -> dict: ...

    @property
    def has_clients(self) -> bool: ...

    def check_active(self) -> None: ...

    def apply_policies(self, policies: TopicPolicies) -> None: ...

    def add_producer(self, producer: Producer, request_id: int) -> bool: ...

    def remove_producer(self, producer: Producer) -> None: ...

    def add_entry(
        self,
        producer: Producer,
        data: bytes,
        n_messages: int,
        is_batch: bool,
        txnid: Any = None,
        metadata: Any = None,
        on_done: Callable[[Position | None, BaseException | None], None] | None = None,
    ) -> None:
        """Store a SEND's entry; ``on_done(position, None)`` or ``on_done(None, error)``, once."""

    async def get_or_create_subscription(
        self, name: str, initial_position: int, durable: bool, start: Position | None
    ) -> Any: ...  # a Subscription

    async def remove_consumer(self, consumer: Consumer) -> None: ...

    async def unsubscribe(self, sub: Any) -> None: ...

    async def last_message_id(self) -> tuple[Position, int]: ...

    def idle_since_ms(self, now_ms: int) -> int: ...

    async def close(self, *, delete: bool = False) -> None: ...


@runtime_checkable
class LoadedTopics(Protocol):
    """The topic registry as the admin layer sees it."""

    def loaded(self) -> list[Any]: ...  # Topic

    def get_loaded(self, name: str) -> Any: ...  # Topic, or None when not loaded here

    async def exists(self, ref: TopicRef) -> bool: ...

    async def get_topic(self, ref: TopicRef, create: bool, explicit: bool = False) -> Any: ...  # Topic

    async def unload(self, ref: TopicRef) -> bool: ...


@runtime_checkable
class BrokerServiceView(Protocol):
    """What ``broker.admin`` may use of the broker service -- and nothing else.

    The admin layer drives the service through this face (configuration, clock,
    metadata, the topic registry, the schema registry and the topic-level
    operations below), never through private members or attributes of its own.
    """

    config: Any  # BrokerConfig
    clock: Clock
    resources: Any  # BrokerResources
    metadata_store: Any  # MetadataStore
    topics: LoadedTopics
    schemas: Any  # SchemaRegistry
    supervisor: Any  # TaskSupervisor
    compaction: Any  # BrokerCompaction
    namespace_service: NamespaceService  # bundles, owners, brokers; may_redirect in a cluster

    async def require_namespace(self, namespace: str) -> None: ...

    async def partitions_of(self, ref: TopicRef) -> int | None: ...

    def web_service_url(self) -> str: ...

    async def list_topics(self, namespace: str, mode: str = "PERSISTENT") -> list[str]: ...

    async def list_partitioned_topics(self, namespace: str) -> list[str]: ...

    async def delete_topic(self, topic: str, force: bool = False) -> None: ...

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None: ...


@runtime_checkable
class WebBrokerView(Protocol):
    """What the web layer's routes, HTTP lookup and WebSocket sessions may use of the broker service.

    The admin routes go through ``broker.admin`` (``AdminService``, which sees
    ``BrokerServiceView``); this is the rest: lookup and ownership, topic
    lifecycle answered by the service itself, the schema registry, the
    security services, and the optional services a route serves.
    """

    config: Any  # BrokerConfig
    clock: Clock
    resources: Any  # BrokerResources
    schemas: Any  # SchemaRegistry
    namespace_service: NamespaceService
    transactions: Any  # TransactionService, or None when transactions are off
    compaction: Any  # BrokerCompaction
    authentication: Any  # AuthenticationService
    authorization: Any  # AuthorizationService
    interceptor: Any  # InterceptorChain, or None

    async def lookup(self, topic: str, authoritative: bool = False) -> dict: ...

    async def lookup_topic(self, topic: str, authoritative: bool = False) -> Any: ...  # LookupResult

    async def partitions_of(self, ref: TopicRef) -> int | None: ...

    async def get_partitioned_metadata(self, topic: str, check_allow_auto_creation: bool = False) -> int: ...

    async def create_partitioned_topic(
        self, topic: str, num_partitions: int, properties: dict | None = None
    ) -> None: ...

    async def update_partitioned_topic(self, topic: str, num_partitions: int) -> None: ...

    async def create_non_partitioned_topic(self, topic: str) -> None: ...

    async def list_topics(self, namespace: str, mode: str = "PERSISTENT") -> list[str]: ...

    async def list_partitioned_topics(self, namespace: str) -> list[str]: ...

    async def delete_topic(self, topic: str, force: bool = False) -> None: ...

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None: ...


@runtime_checkable
class MetricsSource(Protocol):
    """What the ``/metrics`` collectors read of the broker service (read-only, per scrape)."""

    config: Any  # BrokerConfig
    clock: Clock
    topics: LoadedTopics
    ml_factory: Any  # ManagedLedgerFactory: cache and ledger counters
    counters: Any  # collections.Counter[str] of broker-wide events
    connections: Any  # the open connections (a sized collection)
    authentication: Any  # AuthenticationService: outcomes by provider
    namespace_service: NamespaceService  # bundles, load manager
    transactions: Any  # TransactionService, or None
    supervisor: Any  # TaskSupervisor: owns the event-loop lag sampler (metrics_process)
    resource_groups: Any  # ResourceGroupService: the groups' shares and usage (metrics_resource_groups)

    def statistics(self) -> dict[str, int]: ...

    def web_service_url(self) -> str: ...


@runtime_checkable
class TransactionHost(Protocol):
    """What the transaction service (``broker.transaction``) may use of the broker service."""

    clock: Clock
    resources: Any  # BrokerResources: the coordinator-assign partitioned topic
    metadata_store: Any  # MetadataStore: transaction-buffer snapshots
    ml_factory: Any  # ManagedLedgerFactory: coordinator logs, pending-ack logs
    supervisor: Any  # TaskSupervisor: the coordinators' tasks
    topics: LoadedTopics
    namespace_service: NamespaceService  # who owns a coordinator's partition

    def broker_service_url(self, listener: str | None = None) -> str: ...


@runtime_checkable
class LoadBalanceHost(Protocol):
    """What load management (``broker.loadbalance``: the reporter, the load manager and its
    admin endpoints) may use of the broker service."""

    config: Any  # BrokerConfig: loadBalancer* keys
    clock: Clock
    metadata_store: Any  # MetadataStore: load reports, the leader's decisions
    resources: Any  # BrokerResources: namespace policies (bundles), isolation policies
    topics: LoadedTopics  # per-bundle rates of the loaded topics
    supervisor: Any  # TaskSupervisor: the reporter's and the manager's loops
    connections: Any  # the open connections (a sized collection)
    namespace_service: NamespaceService  # owned bundles, unload

    def web_service_url(self) -> str: ...


@runtime_checkable
class ReplicationHost(Protocol):
    """What geo-replication (``broker.replication.service``) may use of the broker service."""

    config: Any  # BrokerConfig: cluster name, replicator rates, brokerClient* credentials
    clock: Clock
    metadata_store: Any  # MetadataStore: the configuration store's clusters
    resources: Any  # BrokerResources: namespace policies, clusters
    topics: LoadedTopics
    schemas: Any  # SchemaRegistry: schemas a replicator registers on the remote topic
    supervisor: Any  # TaskSupervisor: the replication check loop, replicators
    ml_factory: Any  # ManagedLedgerFactory: topics stored here but not loaded
    policy_documents: Any  # PolicyDocuments, or None: change notifications of policy documents

    async def delete_topic(self, topic: str, force: bool = False) -> None: ...
