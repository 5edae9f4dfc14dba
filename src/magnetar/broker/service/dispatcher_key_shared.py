"""Key_Shared dispatch: every entry goes to the consumer owning its key's slot.

Theory of operation
-------------------
The sticky key comes from the entry's outer metadata (ordering key >
partition key > ``NONE_KEY``), hashed to a slot (see
:mod:`key_shared_selector`); the subscription's selector names the owner.
The selector kind is fixed by the first consumer: STICKY when its
``keySharedMeta.keySharedMode`` is 1, otherwise AUTO_SPLIT by consistent
hashing, or by splitting ranges when the broker property
``subscriptionKeySharedUseConsistentHashing`` is false.

Per-key order (Pulsar 4's *draining hashes*, PIP-379): the dispatcher knows,
per slot, which consumers hold unacked entries of it (``_holders``).  An
entry may go to its owner only if no *other* consumer holds unacked entries
of the slot -- after a join or leave moved the slot, the new owner waits
until the old owner acked (or was closed, which redelivers its entries, in
order, ahead of anything newer).  ``allowOutOfOrderDelivery`` (set by the
first consumer) lifts this rule.

An entry that cannot go now (owner missing, out of permits, blocked on
unacked messages, or the slot draining) is parked in the sorted redelivery
set without counting a redelivery; a later entry of a parked slot is parked
too, so it never overtakes.  Each round replays the parked entries whose
owner can take them, else reads new entries while fewer than
``LOOK_AHEAD_LIMIT`` are parked (Java's keySharedLookAheadMsgInReplayThreshold):
one stuck consumer cannot make the broker buffer the whole backlog.

:meth:`key_shared_stats` is the diagnosis view merged into the subscription
stats: mode, every consumer's hash ranges, the draining hashes (slot, old
holder, unacked count) and the parked slots with the reason they wait.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from magnetar.broker.service.admission import unacked_limit_on_subscription
from magnetar.broker.service.consumer import Consumer, OutboundEntry
from magnetar.broker.service.dispatcher_base import Dispatcher
from magnetar.broker.service.key_shared_selector import (
    ConsistentHashingSelector,
    Selector,
    SplitRangeSelector,
    StickyRangeSelector,
    slot_of_metadata,
)
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.enums import KeySharedMode
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import num_messages, peek_metadata

LOOK_AHEAD_LIMIT = 10_000
MAX_STATS_HASHES = 100  # the stats view lists at most this many draining/parked slots


def _truthy(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class KeySharedDispatcher(Dispatcher):
    def __init__(self, subscription: Any, sub_type: int) -> None:
        super().__init__(subscription, sub_type)
        cfg = subscription.topic.config
        extra = getattr(cfg, "extra", {}) or {}
        self._consistent = _truthy(extra.get("subscriptionKeySharedUseConsistentHashing"), True)
        self._points = int(extra.get("subscriptionKeySharedConsistentHashingReplicaPoints", 100))
        self._max_unacked = cfg.max_unacked_messages_per_subscription
        self.mode: int | None = None
        self.allow_out_of_order = False
        self.selector: Selector | None = None
        self._slot_of: dict[Position, int] = {}
        self._holder_of: dict[Position, Consumer] = {}
        self._holders: dict[int, Counter[Consumer]] = {}

    # ------------------------------------------------------------ consumers
    def check_consumer(self, consumer: Consumer) -> None:
        """Validate and register ``consumer`` with the selector (raises ConsumerAssignError)."""
        meta = getattr(consumer, "key_shared_meta", None)
        mode = int(getattr(meta, "keySharedMode", 0) or 0) if meta is not None else 0
        if self.selector is None or not self.consumers:
            self.mode = mode
            self.allow_out_of_order = bool(getattr(meta, "allowOutOfOrderDelivery", False)) if meta else False
            if mode == KeySharedMode.STICKY:
                self.selector = StickyRangeSelector()
            elif self._consistent:
                self.selector = ConsistentHashingSelector(self._points)
            else:
                self.selector = SplitRangeSelector()
        elif mode != self.mode:
            from magnetar.broker import errors

            raise errors.ConsumerBusyError(
                f"Subscription is in Key_Shared mode {_mode_name(self.mode)}, consumer asked {_mode_name(mode)}"
            )
        if mode == KeySharedMode.STICKY and meta is not None:
            consumer.key_shared_ranges = [(r.start, r.end) for r in meta.hashRanges]  # type: ignore[attr-defined]
        self.selector.add_consumer(consumer)

    def add_consumer(self, consumer: Consumer) -> None:
        self.check_consumer(consumer)
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if self.selector is not None:
            self.selector.remove_consumer(consumer)
        super().remove_consumer(consumer)

    # ------------------------------------------------------------ bookkeeping
    def _release(self, pos: Position) -> None:
        holder = self._holder_of.pop(pos, None)
        if holder is None:
            return
        slot = self._slot_of.get(pos)
        counts = self._holders.get(slot) if slot is not None else None
        if counts is not None:
            counts[holder] -= 1
            if counts[holder] <= 0:
                del counts[holder]
            if not counts:
                del self._holders[slot]

    def redeliver(self, positions: list[Position]) -> None:
        for p in positions:
            self._release(p)
        super().redeliver(positions)

    def forget(self, positions: list[Position]) -> None:
        for p in positions:
            self._release(p)
            self._slot_of.pop(p, None)
        super().forget(positions)

    def forget_up_to(self, position: Position) -> None:
        done = [p for p in self._holder_of if p <= position]
        self.forget(done)
        super().forget_up_to(position)

    def reset(self) -> None:
        super().reset()
        self._slot_of.clear()
        self._holder_of.clear()
        self._holders.clear()

    # ------------------------------------------------------------ decisions
    def _sub_blocked(self) -> bool:
        limit = unacked_limit_on_subscription(self.subscription.topic, self._max_unacked)  # policy
        if limit <= 0:
            return False
        return sum(c.unacked_messages for c in self.consumers) >= limit

    def read_budget(self) -> int:
        if self._sub_blocked():
            return 0
        return sum(c.permits for c in self.consumers if c.available)

    def _why_blocked(self, slot: int | None) -> tuple[Consumer | None, str | None]:
        """The slot's owner, and why it cannot take an entry now (None: it can)."""
        if slot is None:
            return None, "unknown slot"
        owner = self.selector.select(slot) if self.selector is not None else None
        if owner is None:
            return None, "no consumer owns this hash"
        if not self.allow_out_of_order:
            counts = self._holders.get(slot)
            if counts:
                for holder, n in counts.items():
                    if holder is not owner and n > 0:
                        return owner, f"draining: {n} unacked entries at consumer {holder.consumer_name!r}"
        if owner.closed or not owner.cnx.writable:
            return owner, "consumer not writable"
        if owner.blocked:
            return owner, "consumer blocked on unacked messages"
        if owner.permits <= 0:
            return owner, "consumer has no permits"
        return owner, None

    # ------------------------------------------------------------ hooks of the round
    async def read_entries(self, budget: int, epoch: int) -> list[Entry] | None:
        """Replay the parked entries whose owner can take them now (a parked slot's later
        entries stay behind its first); else read new ones while the look-ahead has room."""
        if self._redeliver:
            chosen: list[Position] = []
            stuck: set[int] = set()
            for pos in self._redeliver:
                slot = self._slot_of.get(pos)
                if slot is not None and slot in stuck:
                    continue
                if slot is None or self._why_blocked(slot)[1] is None:
                    chosen.append(pos)
                    if len(chosen) >= budget:
                        break
                else:
                    stuck.add(slot)
            if chosen:
                return await self.replay(chosen)
            if len(self._redeliver) >= LOOK_AHEAD_LIMIT:
                return None
        return await self.read_new(budget, epoch)

    def _outbound(self, entry: Entry) -> OutboundEntry:
        """As the base class, but the metadata is parsed once for both count and slot."""
        pos = entry.position
        try:
            md = peek_metadata(entry.data)
            n = num_messages(md)
            slot = slot_of_metadata(md)
        except CorruptPayload:
            n, slot = 1, 1
        self._slot_of.setdefault(pos, slot)
        ack_set = self.subscription.cursor.get_ack_set(pos)
        return OutboundEntry(entry, n, self.redelivery_counts.get(pos, 0), ack_set)

    def _route(self, entries: list[OutboundEntry]) -> None:
        """Hand each entry to its owner, in position order; park what cannot go now."""
        first_parked: dict[int, Position] = {}
        for p in self._redeliver:
            s = self._slot_of.get(p)
            if s is not None and s not in first_parked:
                first_parked[s] = p
        per_consumer: dict[Consumer, list[OutboundEntry]] = {}
        parked: list[Position] = []
        for out in entries:
            pos = out.entry.position
            slot = self._slot_of.get(pos)
            if slot is None:
                try:
                    slot = slot_of_metadata(peek_metadata(out.entry.data))
                except CorruptPayload:
                    slot = 1
                self._slot_of[pos] = slot
            first = first_parked.get(slot)
            if first is not None and pos > first:
                parked.append(pos)  # an earlier entry of this key waits: never overtake it
                continue
            owner, why = self._why_blocked(slot)
            if why is not None or owner is None:
                parked.append(pos)
                if first is None or pos < first:
                    first_parked[slot] = pos
                continue
            per_consumer.setdefault(owner, []).append(out)
            owner.permits -= out.num_messages  # reserve now; send() re-applies below
            self._hold(pos, slot, owner)
        now = self.now_ms()
        for consumer, batch in per_consumer.items():
            consumer.permits += sum(o.num_messages for o in batch)
            self.send_to(consumer, batch, now)
        if parked:
            self.requeue(parked)

    def _hold(self, pos: Position, slot: int, consumer: Consumer) -> None:
        self._holder_of[pos] = consumer
        self._holders.setdefault(slot, Counter())[consumer] += 1

    def deliver(self, entries: list[OutboundEntry]) -> None:
        self._route(entries)

    # ------------------------------------------------------------ stats
    def key_shared_stats(self) -> dict[str, Any]:
        ranges = self.selector.ranges() if self.selector is not None else {}
        consumers = []
        for c in self.consumers:
            draining = []
            for slot, counts in self._holders.items():
                n = counts.get(c, 0)
                if n and self.selector is not None and self.selector.select(slot) is not c:
                    draining.append({"hash": slot, "unackedMessages": n})
            draining.sort(key=lambda d: d["hash"])
            consumers.append(
                {
                    "consumerName": c.consumer_name,
                    "keyHashRanges": [f"[{s}, {e}]" for s, e in ranges.get(c, [])],
                    "keyHashRangeArrays": [[s, e] for s, e in ranges.get(c, [])],
                    "drainingHashesCount": len(draining),
                    "drainingHashesUnackedMessages": sum(d["unackedMessages"] for d in draining),
                    "drainingHashes": draining[:MAX_STATS_HASHES],
                }
            )
        parked: Counter[int] = Counter()
        for p in self._redeliver:
            slot = self._slot_of.get(p)
            if slot is not None:
                parked[slot] += 1
        blocked = []
        for slot, n in sorted(parked.items())[:MAX_STATS_HASHES]:
            owner, why = self._why_blocked(slot)
            blocked.append(
                {
                    "hash": slot,
                    "parkedEntries": n,
                    "owner": owner.consumer_name if owner is not None else None,
                    "reason": why or "ready: waiting for the next dispatch round",
                }
            )
        all_draining = sum(d["drainingHashesCount"] for d in consumers)
        return {
            "keySharedMode": _mode_name(self.mode),
            "allowOutOfOrderDelivery": self.allow_out_of_order,
            "drainingHashesCount": all_draining,
            "drainingHashesUnackedMessages": sum(d["drainingHashesUnackedMessages"] for d in consumers),
            "blockedHashes": blocked,
            "parkedEntries": len(self._redeliver),
            "keySharedConsumers": consumers,
        }


def _mode_name(mode: int | None) -> str:
    return "STICKY" if mode == KeySharedMode.STICKY else "AUTO_SPLIT"
