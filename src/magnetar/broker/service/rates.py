"""Message and byte rates for stats, sampled on a fixed interval like Pulsar's.

Theory of operation: counters only ever grow on the hot path (a plain
integer add); a service task samples them every ``statsUpdateFrequencyInSecs``
and turns the difference since the previous sample into per-second rates.
Between samples the stats show the last computed rate, as Pulsar's do.
Nothing here touches the clock directly: the sampler passes the elapsed time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magnetar.broker.service.topic import PersistentTopic


class Rate:
    __slots__ = ("_last_bytes", "_last_msgs", "byte_rate", "msg_rate")

    def __init__(self) -> None:
        self._last_msgs = 0
        self._last_bytes = 0
        self.msg_rate = 0.0
        self.byte_rate = 0.0

    def sample(self, msgs: int, nbytes: int, elapsed_s: float) -> None:
        if elapsed_s > 0:
            self.msg_rate = max(0, msgs - self._last_msgs) / elapsed_s
            self.byte_rate = max(0, nbytes - self._last_bytes) / elapsed_s
        self._last_msgs, self._last_bytes = msgs, nbytes


class ExpiryCounter:
    """Messages a subscription lost to TTL / expire-messages: ``totalMsgExpired``,
    ``msgRateExpired`` and ``lastExpireTimestamp`` of its stats."""

    __slots__ = ("last_ms", "rate", "total")

    def __init__(self) -> None:
        self.total = 0
        self.last_ms = 0
        self.rate = Rate()

    def add(self, n: int, now_ms: int) -> None:
        self.total += n
        self.last_ms = now_ms


def expiry_of(topic: PersistentTopic, subscription: str) -> ExpiryCounter:
    counters = topic.expired
    counter = counters.get(subscription)
    if counter is None:
        counter = counters[subscription] = ExpiryCounter()
    return counter


async def expire_counted(
    topic: PersistentTopic, name: str, cursor, ttl_ms: int, publish_time_of, now_ms: int
) -> bool:  # noqa: ANN001
    """Expire a subscription's messages older than ``ttl_ms`` and count them (the messages
    the move acknowledged: the backlog in messages before minus after)."""
    before = cursor.number_of_messages_in_backlog()
    moved = await cursor.expire_messages(ttl_ms, publish_time_of)
    if moved:
        expiry_of(topic, name).add(max(0, before - cursor.number_of_messages_in_backlog()), now_ms)
    return bool(moved)


def sample_topic(topic: PersistentTopic, elapsed_s: float) -> None:
    """Update every rate of a topic, its producers, subscriptions and consumers."""
    topic.rate_in.sample(topic.msg_in_counter, topic.bytes_in_counter, elapsed_s)
    for p in topic.producers.values():
        p.rate.sample(p.stats.msg_in_counter, p.stats.bytes_in_counter, elapsed_s)
    for sub in topic.subscriptions.values():
        for c in sub.consumers:
            c.rate_out.sample(c.msg_out_counter, c.bytes_out_counter, elapsed_s)
            c.rate_redeliver.sample(c.redelivered_counter, 0, elapsed_s)
    for counter in topic.expired.values():
        counter.rate.sample(counter.total, 0, elapsed_s)
