"""TransactionService: the broker's transaction parts, and where the end of a transaction goes.

Theory of operation: one per broker, built by ``BrokerService`` when
``transactionCoordinatorEnabled=true`` (else ``BrokerService.transactions`` is None and every
transactional command is refused).  ``start`` creates the partitioned topic
``persistent://pulsar/system/transaction_coordinator_assign`` with ``N`` partitions (kept if
it exists).  Coordinator ``i`` is owned like any topic: it is served by the owner of the
bundle of partition ``i`` only.  A standalone owns every bundle and loads all of them at
start; in a cluster a coordinator loads (recovered from its log, which fences a previous
owner's ledger) when a TC_CLIENT_CONNECT or another request for it reaches the bundle's
owner -- the namespace service's ``check_owned`` takes an unowned bundle, and refuses with
ServiceNotReady when another broker holds it, so the client looks up again.  When the
bundle is unloaded or its lock lost, :meth:`bundle_released` closes the coordinators in it
(their timers stop; in-flight ends fail and the next owner drives them on from the log).

The service also builds the per-topic :class:`TransactionBuffer` (when the topic loads) and
the per-subscription :class:`PendingAckHandle` (when a durable subscription is created), and
implements the coordinator's :class:`Participants`: ``end_partition`` /
``end_subscription`` end the transaction on the topic -- here when the topic is loaded on
this broker or its bundle is ours or nobody's (loading it here takes the bundle; a topic
that no longer exists has nothing to end), else on the bundle's owner, through
END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION (:mod:`remote`).  Those wire commands, arriving here, reach the same two methods.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from magnetar.broker import errors
from magnetar.broker.ownership.bundles import NamespaceBundle, topic_hash
from magnetar.broker.transaction.buffer import TransactionBuffer
from magnetar.broker.transaction.config import TransactionConfig
from magnetar.broker.transaction.coordinator import TransactionCoordinator
from magnetar.broker.transaction.errors import TransactionCoordinatorNotFoundError
from magnetar.broker.transaction.model import TxnID
from magnetar.broker.transaction.remote import RemoteParticipants

if TYPE_CHECKING:
    from magnetar.broker.service.api import TransactionHost
    from magnetar.broker.service.names import TopicRef
    from magnetar.broker.service.subscription import Subscription
    from magnetar.broker.service.topic import PersistentTopic

log = logging.getLogger(__name__)

TC_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
TC_ASSIGN = ("pulsar", "system", "persistent", "transaction_coordinator_assign")


def partition_ref(tc_id: int) -> TopicRef:
    """Partition ``tc_id`` of the coordinator-assign topic: its bundle decides the owner."""
    from magnetar.broker.service.names import parse_topic

    return parse_topic(f"{TC_ASSIGN_TOPIC}-partition-{tc_id}")


class TransactionService:
    def __init__(self, service: TransactionHost, config: TransactionConfig) -> None:
        self.svc = service
        self.config = config
        self._coordinators: dict[int, asyncio.Future[TransactionCoordinator]] = {}
        self.remote = RemoteParticipants(service.clock)  # participants owned by other brokers
        self.closed = False

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        parts = self.svc.resources.partitioned_topics
        n = await parts.partitions(*TC_ASSIGN)
        if n is None:
            try:
                await parts.create(*TC_ASSIGN, self.config.coordinator_count)
            except errors.AlreadyExistsError:
                pass  # another broker created it meanwhile
        if self.svc.namespace_service.may_redirect:
            return  # a cluster: coordinators load where their partitions' bundles go
        for tc_id in range(await self.coordinator_count()):
            await self.coordinator(tc_id)

    async def coordinator_count(self) -> int:
        n = await self.svc.resources.partitioned_topics.partitions(*TC_ASSIGN)
        return n if n is not None else self.config.coordinator_count

    async def coordinator(self, tc_id: int) -> TransactionCoordinator:
        if self.closed:
            raise TransactionCoordinatorNotFoundError("Transaction coordinators are closed")
        fut = self._coordinators.get(tc_id)
        if fut is None:
            if tc_id < 0 or tc_id >= await self.coordinator_count():
                raise TransactionCoordinatorNotFoundError(f"Transaction coordinator {tc_id} does not exist")
            fut = self._coordinators.get(tc_id)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._coordinators[tc_id] = fut
            try:
                await self.svc.namespace_service.check_owned(partition_ref(tc_id))
                tc = await TransactionCoordinator.recover(
                    tc_id,
                    self.svc.ml_factory,
                    self,
                    self.svc.clock,
                    self.svc.supervisor,
                    default_timeout_ms=self.config.default_timeout_ms,
                    max_active=self.config.max_active_per_coordinator,
                    check_interval_ms=self.config.timeout_check_interval_ms,
                )
            except BaseException as exc:
                if self._coordinators.get(tc_id) is fut:  # (bundle_released may have dropped it)
                    del self._coordinators[tc_id]
                fut.set_exception(
                    exc
                    if isinstance(exc, errors.ServiceNotReadyError)
                    else TransactionCoordinatorNotFoundError(f"Coordinator {tc_id} failed to load: {exc}")
                )
                fut.exception()
                raise
            fut.set_result(tc)
            if self._coordinators.get(tc_id) is not fut:  # the bundle went while we recovered
                await tc.close()
                raise errors.ServiceNotReadyError(f"Coordinator {tc_id} moved while loading")
        return await asyncio.shield(fut)

    async def bundle_released(self, bundle: NamespaceBundle) -> None:
        """Closes the coordinators whose partition is in ``bundle`` (unloaded or lost)."""
        if bundle.namespace != "pulsar/system":
            return
        for tc_id, fut in list(self._coordinators.items()):
            if not bundle.range.contains(topic_hash(partition_ref(tc_id).full_name)):
                continue
            del self._coordinators[tc_id]
            if fut.done() and fut.exception() is None:
                log.info("coordinator %d: bundle %s released, closing", tc_id, bundle.name)
                try:
                    await fut.result().close()
                except Exception:
                    log.debug("closing coordinator %d failed", tc_id, exc_info=True)

    def loaded_coordinators(self) -> list[TransactionCoordinator]:
        return [
            f.result() for _, f in sorted(self._coordinators.items()) if f.done() and f.exception() is None
        ]

    async def aclose(self) -> None:
        self.closed = True
        for tc in self.loaded_coordinators():
            try:
                await tc.close()
            except Exception:
                log.debug("closing coordinator %d failed", tc.tc_id, exc_info=True)

    # ------------------------------------------------------------ per topic / subscription
    async def load_buffer(self, topic: PersistentTopic) -> TransactionBuffer:
        return await TransactionBuffer.load(topic, self.svc.metadata_store, self.svc.ml_factory, self.config)

    # ------------------------------------------------------------ participants
    async def _topic(self, name: str) -> PersistentTopic | None:
        from magnetar.broker.service.names import parse_topic

        try:
            return await self.svc.topics.get_topic(parse_topic(name), create=False)
        except errors.TopicNotFoundError:
            return None

    async def _remote_owner(self, topic: str) -> str | None:
        """The URL of the broker owning ``topic``'s bundle when that is another one; None when
        the topic is loaded here, or its bundle is ours or nobody's (it then loads here)."""
        from magnetar.broker.service.names import parse_topic

        ref = parse_topic(topic)
        if self.svc.topics.get_loaded(ref.full_name) is not None:
            return None
        ns = self.svc.namespace_service
        try:
            owner = await ns.owner_of(await ns.bundle_of(ref))
        except (errors.TopicNotFoundError, errors.NamespaceNotFoundError):
            return None
        if owner is None or owner.native_url in (None, self.svc.broker_service_url()):
            return None
        return owner.native_url

    async def end_partition(self, topic: str, txnid: TxnID, commit: bool) -> None:
        owner = await self._remote_owner(topic)
        if owner is not None:
            await self.remote.end_partition(owner, topic, txnid, commit)
            return
        t = await self._topic(topic)
        if t is None:
            log.info("ending %s on %s: the topic no longer exists", txnid, topic)
            return
        if t.txn_buffer is None:
            raise errors.ServiceNotReadyError(f"Topic {topic} has no transaction buffer")
        await t.txn_buffer.end(txnid, commit)

    async def end_subscription(self, topic: str, subscription: str, txnid: TxnID, commit: bool) -> None:
        owner = await self._remote_owner(topic)
        if owner is not None:
            await self.remote.end_subscription(owner, topic, subscription, txnid, commit)
            return
        t = await self._topic(topic)
        if t is None:
            return
        sub = t.subscriptions.get(subscription)
        if sub is None:
            if subscription not in t.ml.cursors:
                return  # unsubscribed: nothing is held any more
            sub = await t.get_or_create_subscription(subscription, 0, True, None)
        await end_on_subscription(sub, txnid, commit)


async def end_on_subscription(sub: Subscription, txnid: TxnID, commit: bool) -> None:
    pending = sub.pending_ack
    if pending is None:
        return
    redeliver, completed = await pending.end(txnid, commit)
    now = sub.topic.clock.time_ms()
    if completed:  # batch entries whose last indexes this commit acknowledged
        for c in sub.consumers:
            c.acked(completed, now)
    if sub.dispatcher is None:
        return
    if redeliver:  # abort: the messages are available again
        for c in sub.consumers:
            c.take_pending(redeliver)  # batch entries were still in flight to a consumer
        sub.dispatcher.redeliver(redeliver)
    else:
        sub.dispatcher.forget(completed)
        sub.dispatcher.notify()


class TransactionAdmin:
    """What ``/admin/v3/transactions`` reads (web/transactions.py): Pulsar's stats shapes."""

    def __init__(self, service: TransactionService) -> None:
        self.txns = service

    async def coordinator_stats(self, tc_id: int | None = None) -> dict:
        if tc_id is not None:
            return (await self.txns.coordinator(tc_id)).stats()
        return {str(tc.tc_id): tc.stats() for tc in self.txns.loaded_coordinators()}

    async def transaction_metadata(self, txnid: TxnID) -> dict:
        tc = await self.txns.coordinator(txnid.most)
        return tc.get(txnid).to_json(self.txns.svc.clock.time_ms())

    async def slow_transactions(self, older_than_ms: int, tc_id: int | None = None) -> dict:
        now = self.txns.svc.clock.time_ms()
        tcs = [await self.txns.coordinator(tc_id)] if tc_id is not None else self.txns.loaded_coordinators()
        return {
            str(m.txnid): m.to_json(now)
            for tc in tcs
            for m in tc.txns.values()
            if now - m.opened_ms >= older_than_ms
        }

    async def _loaded_topic(self, topic: str) -> PersistentTopic:
        t = await self.txns._topic(topic)
        if t is None:
            raise errors.TopicNotFoundError(f"Topic {topic} not found")
        if t.txn_buffer is None:
            raise errors.NotAllowedError(f"Topic {topic} has no transaction buffer")
        return t

    async def buffer_stats(self, topic: str) -> dict:
        return (await self._loaded_topic(topic)).txn_buffer.stats()  # type: ignore[union-attr]

    async def transaction_in_buffer(self, topic: str, txnid: TxnID) -> dict:
        buf = (await self._loaded_topic(topic)).txn_buffer
        assert buf is not None
        start = buf.ongoing.get(txnid)
        return {
            "startPosition": f"{start.ledger_id}:{start.entry_id}" if start is not None else None,
            "aborted": txnid in buf.aborted,
        }

    async def _pending_ack(self, topic: str, subscription: str):  # type: ignore[no-untyped-def]
        t = await self._loaded_topic(topic)
        sub = t.subscriptions.get(subscription)
        if sub is None:
            if subscription not in t.ml.cursors:
                raise errors.SubscriptionNotFoundError(f"Subscription {subscription} not found")
            sub = await t.get_or_create_subscription(subscription, 0, True, None)
        if sub.pending_ack is None:
            raise errors.NotAllowedError(f"Subscription {subscription} has no pending-ack handle")
        return sub.pending_ack

    async def pending_ack_stats(self, topic: str, subscription: str) -> dict:
        return (await self._pending_ack(topic, subscription)).stats()

    async def transaction_in_pending_ack(self, topic: str, subscription: str, txnid: TxnID) -> dict:
        pending = await self._pending_ack(topic, subscription)
        cumulative = pending.cumulative.get(txnid)
        return {
            "cumulativeAckPosition": f"{cumulative.ledger_id}:{cumulative.entry_id}" if cumulative else None,
            "individuallyAckedPositions": [
                f"{p.ledger_id}:{p.entry_id}" for p in pending.by_txn.get(txnid, [])
            ],
        }

    async def abort(self, txnid: TxnID) -> None:
        tc = await self.txns.coordinator(txnid.most)
        await tc.end(txnid, commit=False)
