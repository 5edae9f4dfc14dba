"""What every topic is, stored or not: identity, producers, subscriptions, policies, lifecycle.

Theory of operation: :class:`BaseTopic` is the part of a topic that does not
depend on storage, shared by :class:`~magnetar.broker.service.topic.PersistentTopic`
(a managed ledger underneath) and
:class:`~magnetar.broker.service.nonpersistent_topic.NonPersistentTopic`
(nothing underneath).  Both implement the ``Topic`` protocol of
``broker.service.api``; neither pretends to be the other.

It owns:

* the state machine (``_set_state`` is the only writer)::

      ACTIVE --close()/delete()--> CLOSING --> CLOSED
                                          \\-> DELETED

* the producers (access modes through :class:`ProducerAccess`, names,
  limits) and the subscriptions map;
* the effective policies (``self.policies``, a frozen :class:`TopicPolicies`
  the admin layer's enforcer replaces whole through :meth:`apply_policies`)
  and the per-topic state the admission checks keep (rate windows, quota
  flags, TTL counters).  Nothing outside the topic adds attributes to it;
* the storage facts shared code may ask of any topic, answered here for a
  topic that stores nothing (:attr:`terminated` False, :attr:`stored_cursors`
  empty, :attr:`number_of_entries` and :attr:`storage_size` 0) and by the
  persistent topic from its ledger;
* the features only a stored topic can have, with their absent value:
  ``dedup`` and ``txn_buffer`` None, ``replicators`` empty.

Closing (:meth:`_close_clients`) marks producers closing, waits a bounded
time for publishes in flight (their receipts go out), then tells every
producer (CLOSE_PRODUCER) and consumer (CLOSE_CONSUMER) so the clients
reconnect (after an unload: to whoever owns it next).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.access_mode import ProducerAccess
from magnetar.broker.service.admission import RateWindow, check_producer
from magnetar.broker.service.dispatch_rate import DispatchWindow
from magnetar.broker.service.names import TopicRef
from magnetar.broker.service.policies import UNRESOLVED, TopicPolicies
from magnetar.broker.service.producer import Producer
from magnetar.broker.service.rates import ExpiryCounter, Rate
from magnetar.runtime import Clock, TaskSupervisor

if TYPE_CHECKING:
    from magnetar.broker.replication.replicator import Replicator
    from magnetar.broker.service.resource_groups import ResourceGroupLimiter
    from magnetar.broker.transaction.buffer import TransactionBuffer

CLOSE_DRAIN_TIMEOUT_S = 5.0
NO_CURSORS: Mapping[str, Any] = MappingProxyType({})


class TopicState(enum.Enum):
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"
    DELETED = "deleted"


_TRANSITIONS = {
    TopicState.ACTIVE: {TopicState.CLOSING},
    TopicState.CLOSING: {TopicState.CLOSED, TopicState.DELETED},
    TopicState.CLOSED: set(),
    TopicState.DELETED: set(),
}


class BaseTopic:
    # Immutable starting values are class attributes (shared until a topic assigns its own):
    # an idle topic's instance dict stays small (benchmarks/topic_memory_bench.py).
    msg_in_counter = 0
    bytes_in_counter = 0
    last_publish_ms = 0
    publish_rate_limited_times = 0
    backlog_age_exceeded = False  # the message_age backlog quota is over its limit
    oldest_backlog_age_s = -1  # oldestBacklogMessageAgeSeconds (under a message_age quota)
    # the namespace's resource-group limiter (broker.service.resource_groups), set by the
    # policy enforcer; None: no group
    resource_group: ResourceGroupLimiter | None = None

    def __init__(self, ref: TopicRef, config: BrokerConfig, clock: Clock, supervisor: TaskSupervisor) -> None:
        self.ref = ref
        self.name = ref.full_name
        self.partition_index = ref.partition_index
        self.config = config
        self.clock = clock
        self.supervisor = supervisor
        self.state = TopicState.ACTIVE
        self.producers: dict[str, Producer] = {}
        self.access = ProducerAccess(self)
        self.subscriptions: dict[str, Any] = {}  # name -> a Subscription of this topic's kind
        self.dispatch_window = DispatchWindow()  # dispatchRate, shared by the subscriptions
        self.rate_in = Rate()
        self.created_ms = clock.time_ms()
        self._last_active_ms = self.created_ms
        # Features of a stored topic, absent here (the registry sets them on a persistent topic).
        self.dedup: Any = None  # MessageDeduplication when enabled
        self.txn_buffer: TransactionBuffer | None = None  # when transactions are enabled
        self.replicators: dict[str, Replicator] = {}  # one per remote cluster (broker.replication)
        # Policies: the effective value (replaced whole by apply_policies) and the state the
        # admission checks and the policy enforcer keep per topic.
        self.policies: TopicPolicies = UNRESOLVED
        self.publish_rate_window: RateWindow | None = None
        self.subscribe_rate_windows: dict[tuple[str, str], list[float]] = {}
        self.subscription_idle_since_ms: dict[str, int] = {}  # subscriptionExpirationTime
        self.expired: dict[str, ExpiryCounter] = {}  # messages expired by TTL, per subscription

    def apply_policies(self, policies: TopicPolicies) -> None:
        """Replace the effective policies (one assignment: readers see old or new, never a mix)."""
        self.policies = policies

    def _set_state(self, new: TopicState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise AssertionError(f"topic {self.name}: {self.state} -> {new} not allowed")
        self.state = new

    @property
    def active(self) -> bool:
        return self.state is TopicState.ACTIVE

    def check_active(self) -> None:
        if self.state is not TopicState.ACTIVE:
            raise errors.TopicFencedError(f"Topic {self.name} is closing")

    # ------------------------------------------------------------ storage facts
    @property
    def terminated(self) -> bool:
        """True once the topic was terminated (no more messages may be published)."""
        return False

    @property
    def stored_cursors(self) -> Mapping[str, Any]:
        """The cursors kept in storage, by subscription name (with or without a consumer)."""
        return NO_CURSORS

    @property
    def number_of_entries(self) -> int:
        return 0

    @property
    def storage_size(self) -> int:
        return 0

    def internal_stats(self) -> dict:
        return {"entriesAddedCounter": 0, "numberOfEntries": 0, "totalSize": 0, "ledgers": [], "cursors": {}}

    # ------------------------------------------------------------ producers
    def add_producer(self, producer: Producer, request_id: int) -> bool:
        """Attach a producer; False when it was queued for exclusive access (WaitForExclusive)."""
        self.check_active()
        existing = self.producers.get(producer.producer_name)
        if existing is not None or any(
            p.producer_name == producer.producer_name for p, _ in self.access.waiting
        ):
            raise errors.ProducerBusyError(
                f"Producer with name '{producer.producer_name}' is already connected to topic"
            )
        check_producer(self)  # effective topic/namespace policies (.admission)
        limit = self.config.max_producers_per_topic
        if limit and len(self.producers) >= limit:
            raise errors.ProducerBusyError(f"Topic '{self.name}' reached max producers limit")
        if not self.access.admit(producer, request_id):
            return False
        self.producers[producer.producer_name] = producer
        return True

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.producer_name) is producer:
            del self.producers[producer.producer_name]
        self.access.forget(producer)
        producer.mark_closed()
        if self.state is TopicState.ACTIVE:
            ready = self.access.next_ready()
            if ready is not None:
                waiting, request_id = ready
                self.producers[waiting.producer_name] = waiting
                waiting.cnx.producer_ready(waiting, request_id)

    def notify_dispatchers(self) -> None:
        """New entries exist.  Called by producers *after* writing receipts, so a client never
        sees a message on a consumer before the receipt of its send (Java's order, and cpp's
        close path crashes when a DLQ send is still unacknowledged)."""
        for sub in self.subscriptions.values():
            if sub.dispatcher is not None:
                sub.dispatcher.notify()

    # ------------------------------------------------------------ close
    async def _close_clients(self) -> None:
        """Publishes in flight finish first (their receipts go out), so the client has nothing
        to re-send after it reconnects; new SENDs already fail (the topic is CLOSING)."""
        for producer in list(self.producers.values()):
            producer.mark_closing()
        for producer in list(self.producers.values()):
            await producer.wait_drained(CLOSE_DRAIN_TIMEOUT_S)
        for producer in list(self.producers.values()):
            producer.cnx.broker_closed_producer(producer)
            self.remove_producer(producer)
        for sub in list(self.subscriptions.values()):
            for c in sub.consumers:
                c.cnx.broker_closed_consumer(c)

    def idle_since_ms(self, now_ms: int) -> int:
        """How long nothing was attached and nothing published (0 while in use)."""
        if self.has_clients:
            self._last_active_ms = now_ms
            return 0
        return now_ms - max(self._last_active_ms, self.last_publish_ms)

    @property
    def has_clients(self) -> bool:
        return bool(self.producers) or any(s.consumers for s in self.subscriptions.values())
