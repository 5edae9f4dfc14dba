"""Topic-scoped admin operations: stats, subscriptions, cursor moves, peek, unload, terminate.

Theory of operation: the one owner of what the admin API reads and does to a
topic's state (creating, listing and deleting topics is the service's own
``broker/service/admin.py``, which lookup, the registry and replication
need).  Each operation resolves the topic through the broker's
registry (``svc.topics.get_topic(ref, create=False)`` -- 404 when absent),
refuses what Pulsar refuses (405 on a partitioned topic's base name where
Pulsar does, 405 for non-persistent topics), then drives the managed
ledger's cursor API (skip, clear backlog, expire, reset by publish time or
position, peek).  Where a partitioned base name is accepted (create/delete
subscription, skip_all, expire, reset by time) the operation fans out to
every partition.  Moving a cursor under connected consumers goes through the
subscription (``reset_to``) so the dispatcher forgets what it had read ahead;
Pulsar disconnects consumers on reset, and we do the same.

In a cluster the partitions of one topic belong to different brokers: every
operation on a partitioned base name goes through :class:`PartitionFanOut`
(``partition_fanout.py``), which runs it here for the partitions this broker
owns and as the same REST call on the partition at its owner for the others;
so do the namespace-wide clear-backlog and unsubscribe, topic by topic.

Peek/examine return a :class:`PeekedMessage`: the entry's payload (whole
batch payload for batches, decompressed) plus the metadata fields the web
layer turns into Pulsar's ``X-Pulsar-*`` headers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from magnetar.broker import errors
from magnetar.broker.admin.partition_fanout import PartitionFanOut, for_each_topic_of
from magnetar.broker.service.api import BrokerServiceView
from magnetar.broker.service.names import TopicRef, parse_topic
from magnetar.broker.service.rates import expire_counted
from magnetar.broker.service.stats import merge_topic_stats, topic_stats_dict
from magnetar.broker.service.topic import PersistentTopic
from magnetar.common import rest_models as m
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.protocol.compression import decompress
from magnetar.protocol.payload import parse_headers_and_payload, peek_metadata
from magnetar.runtime import wait_for

LATEST = 2**63 - 1
PEEK_POSITION_MAX = 100_000


def publish_time_of(data: bytes) -> int:
    return int(peek_metadata(data).publish_time)


@dataclass
class PeekedMessage:
    ledger_id: int
    entry_id: int
    payload: bytes
    headers: dict[str, str] = field(default_factory=dict)


class TopicOps:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc
        self.fanout = PartitionFanOut(svc)

    # ------------------------------------------------------------ resolution
    async def _refs(self, topic: str, *, allow_partitioned: bool) -> list[TopicRef]:
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        n = await self._svc.partitions_of(ref)
        if n:
            if not allow_partitioned:
                raise errors.NotAllowedError("Operation not allowed on a partitioned topic")
            return [ref.partition(i) for i in range(n)]
        return [ref]

    async def _topic(self, ref: TopicRef) -> Any:
        """The loaded topic; a partition of an existing partitioned topic is created on first use."""
        if not ref.persistent:
            raise errors.NotAllowedError("Operation not allowed on a non-persistent topic")
        try:
            return await self._svc.topics.get_topic(ref, create=False)
        except errors.TopicNotFoundError:
            if ref.is_partition and ref.partition_index < (await self._svc.partitions_of(ref.base) or 0):
                return await self._svc.topics.get_topic(ref, create=True, explicit=True)
            raise errors.TopicNotFoundError("Topic not found") from None

    async def _topics(self, topic: str, *, allow_partitioned: bool = True) -> list[Any]:
        refs = await self._refs(topic, allow_partitioned=allow_partitioned)
        return [await self._topic(r) for r in refs]

    async def _each(
        self,
        topic: str,
        local: Callable[[Any], Awaitable[Any]],
        method: str,
        suffix: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
    ) -> list[Any]:
        """``local(topic object)`` on the topic, or on each partition of a partitioned one --
        those another broker owns by ``method`` on ``{partition}{suffix}`` at their owner.  The
        results where it was done; a partition's TopicNotFound / SubscriptionNotFound is left
        out (the caller decides what "found nowhere" means), any other error is raised."""
        base = parse_topic(topic)
        refs = await self._refs(topic, allow_partitioned=True)

        async def here(ref: TopicRef) -> Any:
            return await local(await self._topic(ref))

        if [r.full_name for r in refs] == [base.full_name]:
            return [await here(base)]  # one topic: the web layer sent the call to its owner
        outcomes = await self.fanout.each(refs, here, method, suffix, params=params, body=body)
        return [v for _, v in _found(refs, outcomes)]

    async def _partitions_each(
        self, ref: TopicRef, n: int, local: Callable[[TopicRef], Awaitable[Any]], method: str, suffix: str
    ) -> list[tuple[TopicRef, Any]]:
        """(partition, result) of ``local(partition)`` or ``method`` at its owner, missing ones left out."""
        refs = [ref.partition(i) for i in range(n)]
        return _found(refs, await self.fanout.each(refs, local, method, suffix))

    @staticmethod
    def _cursor(t: Any, sub: str) -> Any:
        s = t.subscriptions.get(sub)
        if s is not None:
            return s.cursor
        c = t.ml.cursors.get(sub)
        if c is None:
            raise errors.SubscriptionNotFoundError("Subscription not found")
        return c

    async def _move(self, t: Any, sub: str, position: Position) -> None:
        s = t.subscriptions.get(sub)
        if s is not None:
            for c in list(s.consumers):
                c.cnx.broker_closed_consumer(c)
            await s.reset_to(position)
        else:
            await self._cursor(t, sub).reset_cursor(position)

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
            _found(refs, await self.fanout.each(refs, here, "DELETE", "", params=params))

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
        await self._each(topic, create, "PUT", f"/subscription/{_q(sub)}", body=body)

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
        if not await self._each(topic, delete, "DELETE", f"/subscription/{_q(sub)}", params=params):
            raise errors.SubscriptionNotFoundError("Subscription not found")

    async def skip(self, topic: str, sub: str, n: int) -> None:
        if n < 0:
            raise errors.PreconditionFailedError("Number of messages to skip must be >= 0")
        (t,) = await self._topics(topic, allow_partitioned=False)
        await self._cursor(t, sub).skip_entries(n)
        self._after_move(t, sub)

    async def skip_all(self, topic: str, sub: str) -> None:
        async def clear(t: Any) -> None:
            await self._cursor(t, sub).clear_backlog()
            self._after_move(t, sub)

        if not await self._each(topic, clear, "POST", f"/subscription/{_q(sub)}/skip_all"):
            raise errors.SubscriptionNotFoundError("Subscription not found")

    @staticmethod
    def _after_move(t: Any, sub: str) -> None:
        s = t.subscriptions.get(sub)
        if s is not None and s.dispatcher is not None:
            s.dispatcher.notify()

    async def expire_messages(self, topic: str, sub: str | None, expire_seconds: int) -> None:
        if expire_seconds < 0:
            raise errors.PreconditionFailedError("Expire time must be >= 0")

        async def expire(t: Any) -> None:
            names = [sub] if sub is not None else sorted(set(t.subscriptions) | set(t.ml.cursors))
            found = False
            for name in names:
                try:
                    cursor = self._cursor(t, name)
                except errors.SubscriptionNotFoundError:
                    continue
                found = True
                await expire_counted(
                    t, name, cursor, expire_seconds * 1000, publish_time_of, self._svc.clock.time_ms()
                )
                self._after_move(t, name)
            if sub is not None and not found:
                raise errors.SubscriptionNotFoundError("Subscription not found")

        if sub is None:
            suffix = f"/all_subscription/expireMessages/{expire_seconds}"
        else:
            suffix = f"/subscription/{_q(sub)}/expireMessages/{expire_seconds}"
        if not await self._each(topic, expire, "POST", suffix) and sub is not None:
            raise errors.SubscriptionNotFoundError("Subscription not found")

    async def expire_to_position(self, topic: str, sub: str, pos: m.ResetCursorData) -> None:
        (t,) = await self._topics(topic, allow_partitioned=False)
        cursor = self._cursor(t, sub)
        target = Position(pos.ledger_id, pos.entry_id)
        if pos.is_excluded:
            target = Position(pos.ledger_id, pos.entry_id - 1)
        if target.entry_id >= 0 and cursor.mark_delete_position < target:
            await cursor.mark_delete(target)
        self._after_move(t, sub)

    async def reset_by_time(self, topic: str, sub: str, timestamp_ms: int) -> None:
        async def reset(t: Any) -> None:
            pos = await self._cursor(t, sub).find_position_by_publish_time(timestamp_ms, publish_time_of)
            await self._move(t, sub, pos)

        if not await self._each(topic, reset, "POST", f"/subscription/{_q(sub)}/resetcursor/{timestamp_ms}"):
            raise errors.SubscriptionNotFoundError("Subscription not found")

    async def reset_by_position(self, topic: str, sub: str, data: m.ResetCursorData) -> None:
        (t,) = await self._topics(topic, allow_partitioned=False)
        self._cursor(t, sub)
        if data.ledger_id == -1 and data.entry_id == -1:
            pos = Position.EARLIEST
            first = await t.ml.read_entries_from(Position(0, 0), 1)
            pos = first[0].position if first else t.ml.last_confirmed_entry.next()
        else:
            pos = Position(data.ledger_id, data.entry_id)
            if data.is_excluded:
                pos = pos.next()
        await self._move(t, sub, pos)

    # ------------------------------------------------------------ reading
    async def peek(self, topic: str, sub: str, position: int) -> PeekedMessage:
        if not 1 <= position <= PEEK_POSITION_MAX:
            raise errors.PreconditionFailedError("Message position must be >= 1")
        (t,) = await self._topics(topic, allow_partitioned=False)
        entries = await self._cursor(t, sub).peek_entries(position)
        if len(entries) < position:
            raise errors.TopicNotFoundError("Message not found")
        return self._message(entries[position - 1])

    async def examine(self, topic: str, initial: str, position: int) -> PeekedMessage:
        if initial not in ("earliest", "latest"):
            raise errors.PreconditionFailedError("initialPosition must be earliest or latest")
        if not 1 <= position <= PEEK_POSITION_MAX:
            raise errors.PreconditionFailedError("messagePosition must be >= 1")
        (t,) = await self._topics(topic, allow_partitioned=False)
        if initial == "earliest":
            entries = await t.ml.read_entries_from(Position(0, 0), position)
            if len(entries) < position:
                raise errors.TopicNotFoundError("Message not found")
            return self._message(entries[position - 1])
        total = t.ml.number_of_entries
        if position > total:
            raise errors.TopicNotFoundError("Message not found")
        entries = await t.ml.read_entries_from(Position(0, 0), total)
        return self._message(entries[len(entries) - position])

    async def get_by_id(self, topic: str, ledger_id: int, entry_id: int) -> PeekedMessage:
        (t,) = await self._topics(topic, allow_partitioned=False)
        try:
            entry = await t.ml.read_entry(Position(ledger_id, entry_id))
        except ManagedLedgerError:
            raise errors.TopicNotFoundError("Message not found") from None
        return self._message(entry)

    @staticmethod
    def _message(entry: Any) -> PeekedMessage:
        parsed = parse_headers_and_payload(entry.data, verify=False)
        meta = parsed.metadata
        payload = parsed.payload
        h: dict[str, str] = {"X-Pulsar-Message-ID": f"{entry.ledger_id}:{entry.entry_id}"}
        if meta.compression:
            h["X-Pulsar-compression"] = str(meta.compression)
            h["X-Pulsar-uncompressed-size"] = str(meta.uncompressed_size)
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        props = {kv.key: kv.value for kv in meta.properties}
        if props:
            import json

            h["X-Pulsar-PROPERTY"] = json.dumps(props)
            for k, v in props.items():
                h[f"X-Pulsar-PROPERTY-{k}"] = v
        h["X-Pulsar-publish-time"] = _iso(meta.publish_time)
        if meta.HasField("event_time") and meta.event_time:
            h["X-Pulsar-event-time"] = _iso(meta.event_time)
        if meta.HasField("deliver_at_time"):
            h["X-Pulsar-deliver-at-time"] = _iso(meta.deliver_at_time)
        if meta.HasField("num_messages_in_batch"):
            h["X-Pulsar-num-batch-message"] = str(meta.num_messages_in_batch)
            h["X-Pulsar-batch-size"] = str(len(payload))
        if meta.HasField("null_value") and meta.null_value:
            h["X-Pulsar-null-value"] = "true"
        h["X-Pulsar-producer-name"] = meta.producer_name
        h["X-Pulsar-sequence-id"] = str(meta.sequence_id)
        if meta.HasField("partition_key"):
            h["X-Pulsar-partition-key"] = meta.partition_key
        return PeekedMessage(entry.ledger_id, entry.entry_id, bytes(payload), h)

    # ------------------------------------------------------------ last id / terminate
    async def last_message_id(self, topic: str) -> dict:
        (t,) = await self._topics(topic, allow_partitioned=False)
        pos, batch_index = await t.last_message_id()
        if pos.entry_id < 0:  # a fresh, empty ledger after a roll: the last message is before it
            earlier = [li for li in t.ml.ledgers() if li.ledger_id < pos.ledger_id and li.entries > 0]
            if earlier:
                pos = Position(earlier[-1].ledger_id, earlier[-1].entries - 1)
                batch_index = -1
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


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _found(refs: list[TopicRef], outcomes: list[Any]) -> list[tuple[TopicRef, Any]]:
    """(ref, result) where the operation was done; a missing topic or subscription is left
    out, any other error raised (the first)."""
    out = []
    for ref, o in zip(refs, outcomes, strict=True):
        if isinstance(o, errors.TopicNotFoundError | errors.SubscriptionNotFoundError):
            continue
        if isinstance(o, BaseException):
            raise o
        out.append((ref, o))
    return out


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    frac = ms % 1000
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:03d}".rstrip("0").rstrip(".") + "Z" if frac else base + "Z"
