"""Every dispatcher through the same cases: dispatch rate (messages, bytes), permits, redelivery.

The dispatchers are the broker's own classes -- Exclusive and Failover
(single active consumer), Shared (round-robin), Key_Shared, read_compacted
and Shared with delayed delivery -- around an in-memory cursor, real
consumers on a recording connection and a fake clock (a rate-limit wait
moves the clock, so a 5-second run takes milliseconds).  Each case drives
the one dispatch round (``Dispatcher._dispatch_once``) until it has nothing
left to do, and checks what the connection saw.  A kind that skipped the
rate limit, counted entries instead of messages, or ignored permits fails
here.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.compacted_dispatch import CompactedDispatcher
from magnetar.broker.service.consumer import Consumer
from magnetar.broker.service.dispatch_rate import DispatchWindow
from magnetar.broker.service.dispatcher_base import Dispatcher
from magnetar.broker.service.dispatcher_key_shared import KeySharedDispatcher
from magnetar.broker.service.dispatcher_multi import MultiConsumerDispatcher
from magnetar.broker.service.dispatcher_single import SingleActiveConsumerDispatcher
from magnetar.broker.service.policies import UNRESOLVED
from magnetar.broker.service.subscription import Subscription
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.enums import SubType
from magnetar.protocol.payload import (
    build_headers_and_payload,
    new_message_metadata,
    num_messages,
    peek_metadata,
)

KINDS = ["exclusive", "failover", "shared", "key_shared", "compacted", "delayed"]
START_S = 1000.0
DELAY_S = 0.5  # the "delayed" kind: every message is due this long after it was written


class FakeClock:
    def __init__(self) -> None:
        self.now = START_S

    def monotonic(self) -> float:
        return self.now

    def time_ms(self) -> int:
        return int(self.now * 1000)

    async def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def call_later(self, _delay: float, _fn: object) -> SimpleNamespace:
        return SimpleNamespace(cancel=lambda: None)


class NoTasks:
    """The dispatch loop and timers are not run: the test drives the rounds itself."""

    def spawn(self, coro, name=None):  # noqa: ANN001, ANN201, ARG002
        coro.close()
        return SimpleNamespace(done=lambda: False, cancel=lambda: None)


class Cursor:
    """The managed cursor's dispatch surface over a list of entries."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.by_pos = {e.position: e for e in entries}
        self.next = 0
        self.mark_delete_position = Position(1, -1)

    @property
    def read_position(self) -> Position:
        return Position(1, self.next)

    async def read_entries(self, n: int, max_bytes: int | None = None) -> list[Entry]:
        out: list[Entry] = []
        size = 0
        while self.next < len(self.entries) and len(out) < n:
            e = self.entries[self.next]
            if out and max_bytes is not None and size + len(e.data) > max_bytes:
                break
            out.append(e)
            size += len(e.data)
            self.next += 1
        return out

    async def replay_entries(self, positions: list[Position]) -> list[Entry]:
        return [self.by_pos[p] for p in positions if p > self.mark_delete_position]

    def get_ack_set(self, _pos: Position) -> None:
        return None

    def is_acknowledged(self, pos: Position) -> bool:
        return pos <= self.mark_delete_position

    def rewind(self) -> None:
        self.next = self.mark_delete_position.entry_id + 1

    async def seek(self, pos: Position) -> None:
        self.next = pos.entry_id


class CompactedView:
    """read_compacted over a topic that was never compacted: the view is the topic."""

    horizon = None

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor
        self.next_position = cursor.read_position

    async def read_entries(self, n: int, max_bytes: int | None = None) -> list[Entry]:
        return await self._cursor.read_entries(n, max_bytes)

    def rewind(self) -> None:
        self._cursor.rewind()

    async def close(self) -> None:
        return None


class Wire:
    """A connection that records every MESSAGE frame with the fake time it was written at."""

    writable = True
    peer_address = "test"
    client_version = "test"

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, Position, int, int, int]] = []  # time, position, msgs, bytes, redelivery

    def send_message(self, _cid, pos, _partition, data, redelivery_count, _ack_set) -> None:  # noqa: ANN001
        self.sent.append(
            (self.clock.now, pos, num_messages(peek_metadata(data)), len(data), redelivery_count)
        )

    def send_active_consumer_change(self, *_args: object) -> None:
        return None


def _entries(n: int, *, batch: int, payload: int, deliver_at_ms: int | None) -> list[Entry]:
    out = []
    for i in range(n):
        md = new_message_metadata(
            producer_name="p",
            sequence_id=i,
            publish_time=0,
            partition_key=f"key-{i % 7}",
            deliver_at_time=deliver_at_ms,
        )
        if batch > 1:
            md.num_messages_in_batch = batch
        out.append(Entry(Position(1, i), build_headers_and_payload(md, b"x" * payload)))
    return out


class Setup:
    def __init__(self, kind: str, *, n: int, batch: int = 1, payload: int = 10) -> None:
        self.kind = kind
        self.clock = FakeClock()
        deliver_at = int((START_S + DELAY_S) * 1000) if kind == "delayed" else None
        self.cursor = Cursor(_entries(n, batch=batch, payload=payload, deliver_at_ms=deliver_at))
        config = BrokerConfig(advertised_address="127.0.0.1")
        self.topic = SimpleNamespace(
            name="persistent://public/default/conformance",
            config=config,
            clock=self.clock,
            supervisor=NoTasks(),
            partition_index=-1,
            ml=SimpleNamespace(ledgers=lambda: [], total_size=0, number_of_entries=0),
            policies=UNRESOLVED,
            dispatch_window=DispatchWindow(),
        )
        self.sub = SimpleNamespace(
            topic=self.topic, name="s", cursor=self.cursor, dispatch_window=DispatchWindow(), dispatcher=None
        )
        sub_type = {
            "exclusive": SubType.Exclusive,
            "failover": SubType.Failover,
            "compacted": SubType.Exclusive,
            "shared": SubType.Shared,
            "delayed": SubType.Shared,
            "key_shared": SubType.Key_Shared,
        }[kind]
        self.dispatcher = self._dispatcher(kind, int(sub_type))
        self.sub.dispatcher = self.dispatcher
        self.wire = Wire(self.clock)
        self.consumer = Consumer(self.sub, self.wire, 1, "c1", 0, int(sub_type), -1, 0, {}, 0)  # type: ignore[arg-type]
        self.dispatcher.add_consumer(self.consumer)

    def _dispatcher(self, kind: str, sub_type: int) -> Dispatcher:
        if kind == "compacted":
            return CompactedDispatcher(self.sub, sub_type, CompactedView(self.cursor), from_earliest=False)  # type: ignore[arg-type]
        if kind in ("exclusive", "failover"):
            return SingleActiveConsumerDispatcher(self.sub, sub_type)
        if kind == "key_shared":
            return KeySharedDispatcher(self.sub, sub_type)
        d = MultiConsumerDispatcher(self.sub, sub_type)
        assert (d.delayed is not None) == (kind == "delayed" or kind == "shared")
        return d

    def limit(self, level: str, *, messages: int = -1, size: int = -1) -> None:
        field = "dispatch_rate" if level == "topic" else "subscription_dispatch_rate"
        rate = {
            "dispatchThrottlingRateInMsg": messages,
            "dispatchThrottlingRateInByte": size,
            "ratePeriodInSecond": 1,
        }
        self.topic.policies = dataclasses.replace(UNRESOLVED, resolved=True, **{field: rate})

    async def run(self, seconds: float) -> None:
        """Dispatch rounds until ``seconds`` of fake time passed; idle rounds move the clock."""
        end = self.clock.now + seconds
        for _ in range(100_000):
            if self.clock.now >= end:
                return
            if not await self.dispatcher._dispatch_once():  # noqa: SLF001 - the round under test
                self.clock.now += 0.01

    @property
    def messages(self) -> int:
        return sum(m for _, _, m, _, _ in self.wire.sent)

    def per_period(self, field: int, since: int = 0) -> list[int]:
        """Messages (field 2) or bytes (field 3) sent in each one-second period from the first send
        (of the sends from index ``since`` on)."""
        rows = self.wire.sent[since:]
        t0 = rows[0][0]
        periods: dict[int, int] = {}
        for row in rows:
            k = math.floor(row[0] - t0 + 1e-9)
            periods[k] = periods.get(k, 0) + row[field]
        return [periods.get(k, 0) for k in range(max(periods) + 1)]


@pytest.mark.parametrize("level", ["topic", "subscription"])
@pytest.mark.parametrize("kind", KINDS)
async def test_message_rate_counts_messages_not_entries(kind: str, level: str) -> None:
    s = Setup(kind, n=80, batch=5)  # 400 messages in batches of 5
    s.limit(level, messages=50)
    s.consumer.add_permits(100_000, 0)
    await s.run(4.0)
    periods = s.per_period(2)
    assert all(m <= 50 for m in periods), periods
    assert 150 <= s.messages <= 50 * len(periods), periods


@pytest.mark.parametrize("kind", KINDS)
async def test_byte_rate_holds(kind: str) -> None:
    s = Setup(kind, n=100, payload=1000)
    size = len(s.cursor.entries[0].data)
    s.limit("topic", size=5 * size + size // 2)  # 5.5 entries a second
    s.consumer.add_permits(100_000, 0)
    await s.run(4.0)
    periods = s.per_period(3)
    assert all(b <= 6 * size for b in periods), periods  # at most one entry over, carried as debt
    assert 4 * 5 * size <= sum(periods) <= len(periods) * 5.5 * size, periods  # the debt is paid


@pytest.mark.parametrize("kind", KINDS)
async def test_no_rate_limit_means_no_wait(kind: str) -> None:
    s = Setup(kind, n=300, batch=3)
    s.consumer.add_permits(100_000, 0)
    await s.run(1.0)
    assert s.messages == 900


@pytest.mark.parametrize("kind", KINDS)
async def test_permits_bound_delivery(kind: str) -> None:
    s = Setup(kind, n=50)
    s.consumer.add_permits(7, 0)
    await s.run(1.0)
    assert s.messages == 7
    assert [pos.entry_id for _, pos, _, _, _ in s.wire.sent] == list(range(7))
    s.consumer.add_permits(5, 0)
    await s.run(1.0)
    assert [pos.entry_id for _, pos, _, _, _ in s.wire.sent] == list(range(12))


@pytest.mark.parametrize("kind", KINDS)
async def test_redelivery_after_ack(kind: str) -> None:
    s = Setup(kind, n=5)
    s.consumer.add_permits(5, 0)
    await s.run(1.0)
    assert [pos.entry_id for _, pos, _, _, _ in s.wire.sent] == [0, 1, 2, 3, 4]
    acked = Position(1, 1)
    s.cursor.mark_delete_position = acked  # the first two were acknowledged
    s.consumer.acked_up_to(acked, 0)
    s.dispatcher.forget_up_to(acked)
    Subscription.redeliver_unacknowledged(s.sub, s.consumer, None)  # type: ignore[arg-type]
    s.consumer.add_permits(5, 0)
    await s.run(1.0)
    again = s.wire.sent[5:]
    assert [pos.entry_id for _, pos, _, _, _ in again] == [2, 3, 4]
    assert all(redelivery == 1 for *_, redelivery in again)


@pytest.mark.parametrize("kind", KINDS)
async def test_rate_limit_applies_to_redeliveries(kind: str) -> None:
    s = Setup(kind, n=40)
    s.consumer.add_permits(40, 0)
    await s.run(1.0)
    assert s.messages == 40
    s.limit("subscription", messages=10)
    Subscription.redeliver_unacknowledged(s.sub, s.consumer, None)  # type: ignore[arg-type]
    s.consumer.add_permits(40, 0)
    sent_before = len(s.wire.sent)
    await s.run(2.0)
    periods = s.per_period(2, since=sent_before)
    assert all(m <= 10 for m in periods) and sum(periods) >= 20, periods
