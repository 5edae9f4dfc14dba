"""Acknowledgement bookkeeping of one consumer: grouping, batch tracking, nacks, ack timeouts.

Theory of operation: acknowledgements are not sent one by one. The
:class:`AckGrouper` collects individual acks (entry ids, or entry ids with an
``ack_set`` when batch-index acks are on) and the highest cumulative ack, and
its owner flushes them as one ACK command every ``ack_group_time_ms`` (the
official clients wait 100 ms) or as soon as ``MAX_GROUP`` are pending, and on
close. A message of a batch is acked by index: :class:`BatchTracker` keeps,
per entry, the indexes still un-acked; the entry-level ack is sent when the
last one goes (the default, like ``batch_index_ack_enabled=False``), or every
flush carries the remaining bits in ``ack_set`` (Java's BitSet words: bit i
set = index i still un-acked) when batch-index acks are on.

:class:`RedeliveryTracker` holds messages to redeliver at a time: a negative
ack schedules one ``negative_ack_redelivery_delay_ms`` ahead, an ack timeout
``ack_timeout_ms`` after the message reached the application. With a
:class:`MultiplierRedeliveryBackoff` the nack delay grows with the message's
redelivery count. ``due(now)``
returns the ones whose time came; an ack cancels both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from magnetar.protocol.message_id import MessageId

MAX_GROUP = 1000
EntryKey = tuple[int, int]


def ack_set_words(remaining: Iterable[int], size: int) -> tuple[int, ...]:
    """Java ``BitSet.toLongArray`` of the still-un-acked indexes (signed 64-bit words)."""
    words = [0] * ((size + 63) // 64)
    for i in remaining:
        words[i // 64] |= 1 << (i % 64)
    while words and words[-1] == 0:
        words.pop()
    return tuple(w - (1 << 64) if w >= 1 << 63 else w for w in words)


class BatchTracker:
    def __init__(self) -> None:
        self._remaining: dict[EntryKey, set[int]] = {}

    def ack_index(self, mid: MessageId) -> set[int] | None:
        """Mark one index acked; the remaining set (empty: the whole entry is done)."""
        return self.ack_key((mid.ledger_id, mid.entry_id), mid.batch_index, mid.batch_size)

    def ack_key(self, key: EntryKey, batch_index: int, batch_size: int) -> set[int]:
        left = self._remaining.get(key)
        if left is None:
            left = set(range(batch_size))
            self._remaining[key] = left
        left.discard(batch_index)
        if not left:
            del self._remaining[key]
        return left

    def seed(self, ledger_id: int, entry_id: int, remaining: set[int]) -> None:
        """Start from the broker's view (a redelivered batch's ack_set) if we know nothing newer."""
        self._remaining.setdefault((ledger_id, entry_id), set(remaining))

    def forget_up_to(self, mid: MessageId) -> None:
        for key in [k for k in self._remaining if k <= (mid.ledger_id, mid.entry_id)]:
            del self._remaining[key]

    def clear(self) -> None:
        self._remaining.clear()


class AckGrouper:
    def __init__(self, batch_index_ack: bool) -> None:
        self.batch_index_ack = batch_index_ack
        self.batches = BatchTracker()
        self._individual: dict[EntryKey, MessageId | None] = {}  # None: the plain entry id
        self._cumulative: MessageId | None = None

    def __len__(self) -> int:
        return len(self._individual) + (self._cumulative is not None)

    def add_individual(self, mid: MessageId) -> bool:
        """Record an individual ack; True when the group is full (flush now)."""
        if mid.batch_index >= 0 and mid.batch_size > 1:
            left = self.batches.ack_index(mid)
            if left:
                if not self.batch_index_ack:
                    return False
                entry = MessageId(mid.ledger_id, mid.entry_id, ack_set=ack_set_words(left, mid.batch_size))
                self._individual[(mid.ledger_id, mid.entry_id)] = entry
                return len(self._individual) >= MAX_GROUP
        self._individual[(mid.ledger_id, mid.entry_id)] = None
        return len(self._individual) >= MAX_GROUP

    def add_raw(self, ledger_id: int, entry_id: int, batch_index: int, batch_size: int) -> bool:
        """``add_individual`` without a MessageId (the consumer's hot path); True when full."""
        key = (ledger_id, entry_id)
        if batch_index >= 0 and batch_size > 1:
            left = self.batches.ack_key(key, batch_index, batch_size)
            if left:
                if not self.batch_index_ack:
                    return False
                self._individual[key] = MessageId(
                    ledger_id, entry_id, ack_set=ack_set_words(left, batch_size)
                )
                return len(self._individual) >= MAX_GROUP
        self._individual[key] = None
        return len(self._individual) >= MAX_GROUP

    def add_cumulative(self, mid: MessageId) -> None:
        target = mid
        if mid.batch_index >= 0 and mid.batch_size > 1 and mid.batch_index < mid.batch_size - 1:
            if self.batch_index_ack:
                left = set(range(mid.batch_index + 1, mid.batch_size))
                target = MessageId(mid.ledger_id, mid.entry_id, ack_set=ack_set_words(left, mid.batch_size))
            else:
                target = MessageId(mid.ledger_id, mid.entry_id - 1)  # the previous entry, as Java does
        else:
            target = MessageId(mid.ledger_id, mid.entry_id)
            self.batches.forget_up_to(mid)
        if self._cumulative is None or (target.ledger_id, target.entry_id) >= (
            self._cumulative.ledger_id,
            self._cumulative.entry_id,
        ):
            self._cumulative = target

    def take(self) -> tuple[list[MessageId], MessageId | None]:
        pending, self._individual = self._individual, {}
        ind = [mid if mid is not None else MessageId(*key) for key, mid in pending.items()]
        cum, self._cumulative = self._cumulative, None
        return ind, cum


class MultiplierRedeliveryBackoff:
    """Nack delay growing with the redelivery count: ``min(max, min * multiplier ** count)`` ms (Java's)."""

    def __init__(
        self, min_delay_ms: float = 1000, max_delay_ms: float = 60_000, multiplier: float = 2.0
    ) -> None:
        if min_delay_ms < 0 or max_delay_ms < min_delay_ms or multiplier < 1:
            raise ValueError("need 0 <= min_delay_ms <= max_delay_ms and multiplier >= 1")
        self.min_delay_ms, self.max_delay_ms, self.multiplier = min_delay_ms, max_delay_ms, multiplier

    def next_ms(self, redelivery_count: int) -> float:
        return min(self.max_delay_ms, self.min_delay_ms * self.multiplier ** min(redelivery_count, 64))


class RedeliveryTracker:
    """Messages to redeliver at a deadline (nacks and ack timeouts), keyed by entry."""

    def __init__(self) -> None:
        self._due: dict[EntryKey, tuple[float, Any]] = {}

    def __len__(self) -> int:
        return len(self._due)

    def schedule(self, mid: MessageId, at_s: float, msg: Any) -> None:
        key = (mid.ledger_id, mid.entry_id)
        old = self._due.get(key)
        if old is None or old[0] > at_s:
            self._due[key] = (at_s, msg)

    def cancel(self, mid: MessageId) -> None:
        self._due.pop((mid.ledger_id, mid.entry_id), None)

    def cancel_up_to(self, mid: MessageId) -> None:
        for key in [k for k in self._due if k <= (mid.ledger_id, mid.entry_id)]:
            del self._due[key]

    def due(self, now_s: float) -> list[Any]:
        keys = [k for k, (at, _m) in self._due.items() if at <= now_s]
        return [self._due.pop(k)[1] for k in keys]

    def clear(self) -> None:
        self._due.clear()
