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

Peek/examine return a :class:`PeekedMessage`: the entry's payload (whole
batch payload for batches, decompressed) plus the metadata fields the web
layer turns into Pulsar's ``X-Pulsar-*`` headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from magnetar.broker import errors
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
        if not ref.persistent:
            raise errors.NotAllowedError("Operation not allowed on a non-persistent topic")
        try:
            return await self._svc.topics.get_topic(ref, create=False)
        except errors.TopicNotFoundError:
            raise errors.TopicNotFoundError("Topic not found") from None

    async def _topics(self, topic: str, *, allow_partitioned: bool = True) -> list[Any]:
        refs = await self._refs(topic, allow_partitioned=allow_partitioned)
        if len(refs) == 1:
            return [await self._topic(refs[0])]
        out = []
        for r in refs:
            try:
                out.append(await self._topic(r))
            except errors.TopicNotFoundError:
                out.append(await self._svc.topics.get_topic(r, create=True, explicit=True))
        return out

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
            names: set[str] = set()
            for i in range(n):
                try:
                    names.update(await self.list_subscriptions(ref.partition(i).full_name))
                except errors.TopicNotFoundError:
                    pass
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
        per: dict[str, dict] = {}
        for i in range(n):
            p = ref.partition(i)
            try:
                t = await self._svc.topics.get_topic(p, create=False)
            except errors.TopicNotFoundError:
                continue
            per[p.full_name] = topic_stats_dict(t, self._svc.web_service_url())
        out = merge_topic_stats(list(per.values()))
        out["metadata"] = {"partitions": n}
        out["partitions"] = per if per_partition else {}
        return out

    async def unload_topic(self, topic: str) -> None:
        """Close the topic (each partition of a partitioned one); clients reconnect."""
        ref = parse_topic(topic)
        n = await self._svc.partitions_of(ref)
        refs = [ref.partition(i) for i in range(n)] if n else [ref]
        for r in refs:
            await self._svc.topics.unload(r)

    # ------------------------------------------------------------ subscriptions
    async def create_subscription(self, topic: str, sub: str, start: m.ResetCursorData | None) -> None:
        if not sub:
            raise errors.PreconditionFailedError("Subscription name is empty")
        ref = parse_topic(topic)
        if not ref.persistent:
            raise errors.PreconditionFailedError(
                "Create subscription on non-persistent topic is not supported"
            )
        topics = await self._topics(topic)
        for t in topics:
            if sub in t.subscriptions or sub in t.ml.cursors:
                raise errors.AlreadyExistsError("Subscription already exists for topic")
        for t in topics:
            earliest = start is not None and start.ledger_id == -1 and start.entry_id == -1
            cursor = await t.ml.open_cursor(
                sub, InitialPosition.EARLIEST if earliest else InitialPosition.LATEST
            )
            if start is not None and not earliest and start.ledger_id not in (-1, LATEST):
                pos = Position(start.ledger_id, start.entry_id)
                await cursor.reset_cursor(pos.next() if start.is_excluded else pos)

    async def delete_subscription(self, topic: str, sub: str, force: bool = False) -> None:
        found = False
        for t in await self._topics(topic):
            s = t.subscriptions.get(sub)
            if s is not None:
                if s.consumers and not force:
                    raise errors.PreconditionFailedError("Subscription has active connected consumers")
                found = True
                for c in list(s.consumers):
                    c.cnx.broker_closed_consumer(c)
                await t.unsubscribe(s)
            elif sub in t.ml.cursors:
                found = True
                await t.ml.delete_cursor(sub)
        if not found:
            raise errors.SubscriptionNotFoundError("Subscription not found")

    async def skip(self, topic: str, sub: str, n: int) -> None:
        if n < 0:
            raise errors.PreconditionFailedError("Number of messages to skip must be >= 0")
        (t,) = await self._topics(topic, allow_partitioned=False)
        await self._cursor(t, sub).skip_entries(n)
        self._after_move(t, sub)

    async def skip_all(self, topic: str, sub: str) -> None:
        found = False
        for t in await self._topics(topic):
            try:
                cursor = self._cursor(t, sub)
            except errors.SubscriptionNotFoundError:
                continue
            found = True
            await cursor.clear_backlog()
            self._after_move(t, sub)
        if not found:
            raise errors.SubscriptionNotFoundError("Subscription not found")

    @staticmethod
    def _after_move(t: Any, sub: str) -> None:
        s = t.subscriptions.get(sub)
        if s is not None and s.dispatcher is not None:
            s.dispatcher.notify()

    async def expire_messages(self, topic: str, sub: str | None, expire_seconds: int) -> None:
        if expire_seconds < 0:
            raise errors.PreconditionFailedError("Expire time must be >= 0")
        found = False
        for t in await self._topics(topic):
            names = [sub] if sub is not None else sorted(set(t.subscriptions) | set(t.ml.cursors))
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
        found = False
        for t in await self._topics(topic):
            try:
                cursor = self._cursor(t, sub)
            except errors.SubscriptionNotFoundError:
                continue
            found = True
            pos = await cursor.find_position_by_publish_time(timestamp_ms, publish_time_of)
            await self._move(t, sub, pos)
        if not found:
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
        for i in range(n):
            await self.terminate(ref.partition(i).full_name)


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    frac = ms % 1000
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:03d}".rstrip("0").rstrip(".") + "Z" if frac else base + "Z"
