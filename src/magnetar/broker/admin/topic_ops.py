"""Topic-scoped admin operations: stats, subscriptions, cursor moves, peek, unload, terminate.

Theory of operation: :class:`TopicOps` is the one owner of what the admin API
reads and does to a topic's state (creating, listing and deleting topics is
the service's own ``broker/service/admin.py``, which lookup, the registry and
replication need).  It is one object for the web layer
(``admin(request).topics``), written in four modules by purpose, each a base
of the next:

* ``topic_resolve.py`` -- finding the topic or partitions an operation names,
  and running it on each (in a cluster, partitions owned elsewhere by the same
  REST call at their owner, ``partition_fanout.py``);
* ``topic_cursor_ops.py`` -- cursor moves: skip, clear backlog, expire, reset;
* ``topic_peek.py`` -- reading messages: peek, examine, get by id;
* this module -- stats and internal stats (also merged over partitions), the
  list of subscriptions, unload, subscription create / delete, last message
  id, terminate, and the namespace-wide clear-backlog and unsubscribe (each
  topic on its owner, :func:`for_each_topic_of`).

Where a partitioned base name is accepted (stats, subscriptions, create /
delete subscription, unload, terminate, delete) the operation fans out to
every partition; Pulsar's 405 answers stay where Pulsar gives them.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors
from magnetar.broker.admin.partition_fanout import for_each_topic_of
from magnetar.broker.admin.topic_peek import PeekOps
from magnetar.broker.admin.topic_resolve import found, q
from magnetar.broker.service.names import TopicRef, parse_topic
from magnetar.broker.service.stats import merge_topic_stats, topic_stats_dict
from magnetar.broker.service.topic import PersistentTopic
from magnetar.common.lazy_import import lazy_import
from magnetar.managed_ledger.api import InitialPosition, Position
from magnetar.runtime import wait_for

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)

LATEST = 2**63 - 1


class TopicOps(PeekOps):
    # ------------------------------------------------------------ stats, unload
    async def _existing_topic(self, topic: str) -> Any:
        """A loaded (or loadable) non-partitioned topic of either kind; 404 otherwise."""
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        if await self._svc.partitions_of(ref) is not None:
            raise errors.TopicNotFoundError(
                "Topic not found: it is a partitioned topic, use partitioned-stats"
            )
        try:
            return await self._svc.topics.get_topic(ref, create=False)
        except errors.TopicNotFoundError:
            raise errors.TopicNotFoundError("Topic not found") from None

    async def topic_stats(self, topic: str) -> dict:
        """Pulsar's TopicStats (field names as Pulsar's), with the compaction figures."""
        t = await self._existing_topic(topic)
        out = topic_stats_dict(t, self._svc.web_service_url())
        out["compaction"] = self._svc.compaction.stats_of(t.name)
        return out

    async def internal_stats(self, topic: str, metadata: bool = False) -> dict:
        """The managed ledger's internal stats (all zero for a topic that stores nothing)."""
        t = await self._existing_topic(topic)
        if metadata and isinstance(t, PersistentTopic):
            return await t.ml.internal_stats_with_metadata()
        return t.internal_stats()

    async def list_subscriptions(self, topic: str) -> list[str]:
        """Subscription names, with or without consumers; a partitioned topic's over its partitions."""
        ref = parse_topic(topic)
        n = await self._svc.partitions_of(ref)
        if n:

            async def here(p: TopicRef) -> list[str]:
                return await self.list_subscriptions(p.full_name)

            names: set[str] = set()
            for _, subs in await self._partitions_each(ref, n, here, "GET", "/subscriptions"):
                names.update(subs)
            return sorted(names)
        t = await self._existing_topic(topic)
        return sorted(set(t.subscriptions) | set(t.stored_cursors))

    async def partitioned_topic_stats(self, topic: str, per_partition: bool = True) -> dict:
        """The partitions' stats merged (Pulsar's PartitionedTopicStats)."""
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        n = await self._svc.partitions_of(ref)
        if n is None:
            raise errors.TopicNotFoundError("Partitioned Topic not found")

        async def here(p: TopicRef) -> dict:
            return topic_stats_dict(
                await self._svc.topics.get_topic(p, create=False), self._svc.web_service_url()
            )

        per: dict[str, dict] = {}
        for p, stats in await self._partitions_each(ref, n, here, "GET", "/stats"):
            stats.pop("compaction", None)  # an owner's answer carries it; a partitioned topic's has none
            per[p.full_name] = stats
        out = merge_topic_stats(list(per.values()))
        out["metadata"] = {"partitions": n}
        out["partitions"] = per if per_partition else {}
        return out

    async def partitioned_internal_stats(self, topic: str) -> dict:
        """Each partition's managed-ledger internal stats (Pulsar's PartitionedManagedLedgerInfo)."""
        ref = parse_topic(topic)
        n = await self._svc.partitions_of(ref)
        if not n:
            raise errors.TopicNotFoundError("Partitioned topic not found")

        async def here(p: TopicRef) -> dict:
            return await self.internal_stats(p.full_name)

        parts = await self._partitions_each(ref, n, here, "GET", "/internalStats")
        return {"metadata": {"partitions": n}, "partitions": {p.full_name: st for p, st in parts}}

    async def unload_topic(self, topic: str) -> None:
        """Close the topic (each partition of a partitioned one); clients reconnect."""
        ref = parse_topic(topic)
        n = await self._svc.partitions_of(ref)
        if not n:
            await self._svc.topics.unload(ref)
            return

        async def here(p: TopicRef) -> None:
            await self._svc.topics.unload(p)

        await self._partitions_each(ref, n, here, "PUT", "/unload")

    async def delete_partitions_elsewhere(self, topic: str, force: bool = False) -> None:
        """Before the service deletes a partitioned topic (``delete_partitioned_topic``, which
        deletes the partitions loaded here and the metadata): each partition another broker
        owns is deleted there (it refuses while clients are connected, unless ``force``)."""
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        n = await self._svc.partitions_of(ref) if not ref.is_partition else None
        if n:
            refs = [ref.partition(i) for i in range(n)]

            async def here(p: TopicRef) -> None:  # owned here: the service deletes it
                return None

            params = {"force": str(force).lower()}
            found(refs, await self.fanout.each(refs, here, "DELETE", "", params=params))

    # ------------------------------------------------------------ subscriptions
    async def create_subscription(self, topic: str, sub: str, start: m.ResetCursorData | None) -> None:
        if not sub:
            raise errors.PreconditionFailedError("Subscription name is empty")
        ref = parse_topic(topic)
        if not ref.persistent:
            raise errors.PreconditionFailedError(
                "Create subscription on non-persistent topic is not supported"
            )

        async def names(t: Any) -> list[str]:
            return sorted(set(t.subscriptions) | set(t.ml.cursors))

        if any(sub in found for found in await self._each(topic, names, "GET", "/subscriptions")):
            raise errors.AlreadyExistsError("Subscription already exists for topic")

        async def create(t: Any) -> None:
            earliest = start is not None and start.ledger_id == -1 and start.entry_id == -1
            cursor = await t.ml.open_cursor(
                sub, InitialPosition.EARLIEST if earliest else InitialPosition.LATEST
            )
            if start is not None and not earliest and start.ledger_id not in (-1, LATEST):
                pos = Position(start.ledger_id, start.entry_id)
                await cursor.reset_cursor(pos.next() if start.is_excluded else pos)

        body = m.dump(start) if start is not None else None
        await self._each(topic, create, "PUT", f"/subscription/{q(sub)}", body=body)

    async def delete_subscription(self, topic: str, sub: str, force: bool = False) -> None:
        async def delete(t: Any) -> None:
            s = t.subscriptions.get(sub)
            if s is not None:
                if s.consumers and not force:
                    raise errors.PreconditionFailedError("Subscription has active connected consumers")
                for c in list(s.consumers):
                    c.cnx.broker_closed_consumer(c)
                await t.unsubscribe(s)
            elif sub in t.ml.cursors:
                await t.ml.delete_cursor(sub)
            else:
                raise errors.SubscriptionNotFoundError("Subscription not found")

        params = {"force": str(force).lower()}
        if not await self._each(topic, delete, "DELETE", f"/subscription/{q(sub)}", params=params):
            raise errors.SubscriptionNotFoundError("Subscription not found")

    # ------------------------------------------------------------ last id / terminate
    async def last_message_id(self, topic: str) -> dict:
        (t,) = await self._topics(topic, allow_partitioned=False)
        pos, batch_index = await t.last_message_id()  # already looks past a just-rolled ledger
        out = {"ledgerId": pos.ledger_id, "entryId": pos.entry_id, "partitionIndex": t.partition_index}
        if batch_index >= 0:
            out["batchIndex"] = batch_index
        return out

    async def terminate(self, topic: str) -> dict:
        ref = parse_topic(topic)
        if not ref.persistent:
            raise errors.InvalidPartitionCountError("Termination of a non-persistent topic is not allowed")
        (t,) = await self._topics(topic, allow_partitioned=False)
        await wait_for(self._svc.clock, t.ml.terminate(), 30)
        for p in list(t.producers.values()):
            p.cnx.broker_closed_producer(p)
            t.remove_producer(p)
        last = await self.last_message_id(topic)
        return {"ledgerId": last["ledgerId"], "entryId": last["entryId"], "partitionIndex": t.partition_index}

    async def terminate_partitions(self, topic: str) -> None:
        ref = parse_topic(topic)
        n = await self._svc.partitions_of(ref)
        if not n:
            raise errors.NotAllowedError("Topic is not partitioned")

        async def here(p: TopicRef) -> dict:
            return await self.terminate(p.full_name)

        refs = [ref.partition(i) for i in range(n)]
        for outcome in await self.fanout.each(refs, here, "POST", "/terminate"):
            if isinstance(outcome, BaseException):
                raise outcome

    # ------------------------------------------------------------ namespace-wide
    async def clear_namespace_backlog(self, namespace: str, sub: str | None = None) -> None:
        """Skips all on every subscription (or ``sub``) of every topic of the namespace, each
        topic on its owner."""
        await for_each_topic_of(self, namespace, sub, "skip_all")

    async def unsubscribe_namespace(self, namespace: str, sub: str) -> None:
        """Deletes ``sub`` on every topic of the namespace that has it, each on its owner."""
        await for_each_topic_of(self, namespace, sub, "delete")
