"""How a topic-state admin operation finds its topics: the base of ``TopicOps``.

Theory of operation: every operation of :class:`~magnetar.broker.admin.topic_ops.TopicOps`
starts here.  A name is parsed, its namespace must exist, and the partitioned
metadata decides what it names: one topic, or the partitions of a partitioned
one (refused with 405 where Pulsar refuses a base name).  A topic is resolved
through the broker's registry (``svc.topics.get_topic(ref, create=False)`` --
404 when absent; a partition of an existing partitioned topic is created on
first use, as Pulsar does), and only persistent topics have state to
administer (405 for a non-persistent one).  :meth:`TopicResolution._each` runs
an operation on the topic or on every partition; in a cluster the partitions
other brokers own go through :class:`PartitionFanOut` as the same REST call at
their owner, and "found on no partition" stays the caller's decision
(:func:`found`).  Everything reaches the broker through ``BrokerServiceView``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from magnetar.broker import errors
from magnetar.broker.admin.partition_fanout import PartitionFanOut
from magnetar.broker.service.api import BrokerServiceView
from magnetar.broker.service.names import TopicRef, parse_topic


class TopicResolution:
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
        return [v for _, v in found(refs, outcomes)]

    async def _partitions_each(
        self, ref: TopicRef, n: int, local: Callable[[TopicRef], Awaitable[Any]], method: str, suffix: str
    ) -> list[tuple[TopicRef, Any]]:
        """(partition, result) of ``local(partition)`` or ``method`` at its owner, missing ones left out."""
        refs = [ref.partition(i) for i in range(n)]
        return found(refs, await self.fanout.each(refs, local, method, suffix))


def q(segment: str) -> str:
    """One path segment, percent-encoded (subscription names in fanned-out calls)."""
    return quote(segment, safe="")


def found(refs: list[TopicRef], outcomes: list[Any]) -> list[tuple[TopicRef, Any]]:
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
