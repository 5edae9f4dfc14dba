"""The delay index: tick buckets (never early, at most a tick late), overflow and storage rescan."""

from __future__ import annotations

from types import SimpleNamespace

from magnetar.broker.service.delayed_delivery import DelayedDeliveryTracker
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def time_ms(self) -> int:
        return self.now_ms

    async def sleep(self, seconds: float) -> None:
        return None


class NoTimers:
    def __init__(self) -> None:
        self.spawned = 0

    def spawn(self, coro, name=None):  # noqa: ANN001, ANN201
        coro.close()
        self.spawned += 1
        return SimpleNamespace(done=lambda: False, cancel=lambda: None)


def entry(i: int, deliver_at: int | None) -> Entry:
    md = new_message_metadata(producer_name="p", sequence_id=i, publish_time=0, deliver_at_time=deliver_at)
    return Entry(Position(1, i), build_headers_and_payload(md, b"x"))


class FakeML:
    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries

    async def read_entries_from(self, start: Position, n: int) -> list[Entry]:
        return [e for e in self.entries if e.position >= start][:n]


def make(entries: list[Entry], now_ms: int, cap: int):  # noqa: ANN201
    clock = FakeClock(now_ms)
    acked: set[Position] = set()
    cursor = SimpleNamespace(read_position=Position(1, len(entries)), is_acknowledged=lambda p: p in acked)
    topic = SimpleNamespace(clock=clock, supervisor=NoTimers(), ml=FakeML(entries))
    requeued: list[Position] = []
    dispatcher = SimpleNamespace(
        subscription=SimpleNamespace(topic=topic, cursor=cursor),
        notify=lambda: None,
        requeue=requeued.extend,
        _redeliver=[],
        consumers=[],
    )
    tracker = DelayedDeliveryTracker(dispatcher, tick_ms=1000, max_indexed=cap)
    return tracker, clock, requeued, acked, dispatcher


def test_never_early_and_at_most_a_tick_late():
    entries = [entry(0, None), entry(1, 10_500), entry(2, 10_999), entry(3, 11_000), entry(4, 9_000)]
    tracker, clock, _, _, _ = make(entries, now_ms=10_000, cap=100)
    kept = tracker.filter(entries)
    assert [e.position.entry_id for e in kept] == [0, 4]  # not delayed, or already due
    assert tracker.size == 3
    clock.now_ms = 10_998
    assert tracker.take_due() == []  # bucket [10000, 11000) not complete: 10_999 is not due yet
    clock.now_ms = 10_999
    assert tracker.take_due() == [Position(1, 1), Position(1, 2)]  # 10_500 released 499 ms late
    clock.now_ms = 11_998
    assert tracker.take_due() == []
    clock.now_ms = 11_999
    assert tracker.take_due() == [Position(1, 3)]
    assert tracker.size == 0


async def test_overflow_skips_then_rescans_storage():
    entries = [entry(i, 20_000 + i * 100) for i in range(10)]
    tracker, clock, requeued, acked, dispatcher = make(entries, now_ms=10_000, cap=4)
    assert tracker.filter(entries) == []
    assert tracker.size == 4 and tracker.scan_from == Position(1, 4)
    # entry 5 got delivered some other way and is in flight: the rescan must not index it twice
    dispatcher.consumers.append(SimpleNamespace(pending_acks={Position(1, 5): 1}))
    acked.add(Position(1, 6))  # and entry 6 was acknowledged
    clock.now_ms = 20_999  # the first bucket (entries 0..9 at 20_000..20_900) is due
    await tracker.before_round()
    assert requeued[:4] == [Position(1, i) for i in range(4)]
    # the rescan found 4, 7, 8, 9 (not 5: in flight, not 6: acked); all due now -> queued at once
    assert sorted(requeued[4:]) == [Position(1, 4), Position(1, 7), Position(1, 8), Position(1, 9)]
    assert tracker.scan_from is None and tracker.size == 0


async def test_rescan_stops_again_at_the_cap():
    entries = [entry(i, 20_000 if i < 4 else 50_000) for i in range(12)]
    tracker, clock, requeued, _, _ = make(entries, now_ms=10_000, cap=4)
    tracker.filter(entries)
    assert tracker.size == 4 and tracker.scan_from == Position(1, 4)
    clock.now_ms = 20_999
    await tracker.before_round()  # releases 0..3, rescans: indexes 4..7, stops at 8
    assert requeued == [Position(1, i) for i in range(4)]
    assert tracker.size == 4 and tracker.scan_from == Position(1, 8)
    clock.now_ms = 50_999
    await tracker.before_round()  # releases 4..7, rescans 8..11 (due now: queued at once)
    assert requeued[4:] == [Position(1, i) for i in range(4, 12)]
    assert tracker.scan_from is None and tracker.size == 0
