"""The WebSocket API's BrokerLink stands where a binary-protocol connection stands: it provides
``api.Connection`` and shares its tables, dispatch hook and teardown with ``Connection``
through ``TransportCnx`` (not a copy of them)."""

from __future__ import annotations

from magnetar.broker.service import api
from magnetar.broker.service.connection import Connection
from magnetar.broker.service.transport_cnx import TransportCnx
from magnetar.web.websocket.broker_link import BrokerLink

SHARED = ("intercept_dispatch", "forget_producer", "forget_consumer", "release_clients")


def test_both_connections_share_transport_cnx() -> None:
    for cls in (Connection, BrokerLink):
        assert issubclass(cls, TransportCnx)
        for name in SHARED:
            assert getattr(cls, name) is getattr(TransportCnx, name), f"{cls.__name__}.{name} overridden"


def test_broker_link_provides_the_connection_protocol() -> None:
    callables = {n for n, v in vars(api.Connection).items() if not n.startswith("_") and callable(v)}
    missing = sorted(c for c in callables if not hasattr(BrokerLink, c))
    assert not missing, f"BrokerLink lacks {missing}"


class _Topic:
    def __init__(self) -> None:
        self.removed: list[object] = []

    def remove_producer(self, producer: object) -> None:
        self.removed.append(producer)


class _Producer:
    def __init__(self, pid: int, topic: _Topic) -> None:
        self.producer_id = pid
        self.topic = topic


class _Service:
    interceptor = None


async def test_forget_only_what_is_still_ours_and_release_on_close() -> None:
    link = BrokerLink(_Service(), listener=None, peer_address="ws")  # type: ignore[arg-type]
    topic = _Topic()
    p1, stale = _Producer(1, topic), _Producer(1, topic)
    link.producers[1] = p1  # type: ignore[assignment]
    assert not link.forget_producer(stale)  # type: ignore[arg-type]
    assert link.forget_producer(p1)  # type: ignore[arg-type]
    assert 1 in link.recently_closed_producers and not link.producers
    p2 = _Producer(2, topic)
    link.producers[2] = p2  # type: ignore[assignment]
    await link.release_clients()
    assert topic.removed == [p2] and not link.producers
