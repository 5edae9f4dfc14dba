"""Active-consumer election of Failover subscriptions, without sockets."""

from __future__ import annotations

from types import SimpleNamespace

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.dispatcher_single import SingleActiveConsumerDispatcher, _ring_pick


def _dispatcher(partition_index: int) -> SingleActiveConsumerDispatcher:
    topic = SimpleNamespace(config=BrokerConfig(), partition_index=partition_index, name="persistent://t/n/x")
    sub = SimpleNamespace(topic=topic)
    return SingleActiveConsumerDispatcher(sub, 2)


def _c(name: str, priority: int = 0) -> SimpleNamespace:
    return SimpleNamespace(consumer_name=name, priority_level=priority, closed=False)


def test_partition_index_modulo_over_sorted_names() -> None:
    for index, expected in [(0, "a"), (1, "b"), (2, "c"), (3, "a")]:
        d = _dispatcher(index)
        d.consumers = [_c("c"), _c("a"), _c("b")]
        assert d._pick_active().consumer_name == expected


def test_best_priority_level_only() -> None:
    d = _dispatcher(1)
    d.consumers = [_c("a", 1), _c("b", 0), _c("c", 0), _c("d", 2)]
    assert d._pick_active().consumer_name == "c"  # sorted [b, c] at level 0, index 1


def test_empty_names_and_closed_consumers() -> None:
    d = _dispatcher(0)
    closed = _c("a")
    closed.closed = True
    d.consumers = [closed, _c(""), _c("z")]
    assert d._pick_active().consumer_name == ""


def test_ring_pick_is_stable_and_uses_every_consumer() -> None:
    ranked = [_c(f"consumer-{i}") for i in range(4)]
    picks = {_ring_pick(ranked, f"persistent://t/n/topic-{j}").consumer_name for j in range(200)}
    assert picks == {c.consumer_name for c in ranked}
    assert _ring_pick(ranked, "persistent://t/n/x") is _ring_pick(list(ranked), "persistent://t/n/x")
