"""The ZooKeeper session watcher's rules, without ZooKeeper: kazoo states in, SessionEvents out."""

from __future__ import annotations

import asyncio

from kazoo.protocol.states import KazooState

from magnetar.metadata.api import SessionEvent
from magnetar.metadata.zk_session import ZKSessionWatcher
from magnetar.testing.clock import ManualClock


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.events: list[SessionEvent] = []
        self.restarts = 0
        self.cid: tuple[int, bytes] | None = (0x11, b"pw")
        self.w = ZKSessionWatcher(
            loop=asyncio.get_running_loop(),
            clock=self.clock,
            session_timeout_ms=2_000,
            client_id=lambda: self.cid,
            emit=self.events.append,
            restart=self._restart,
        )

    def _restart(self) -> None:
        self.restarts += 1

    def state(self, s: KazooState, cid: tuple[int, bytes] | None = None) -> None:
        self.cid = cid
        self.w.on_state(s)


async def test_first_connect_is_silent_then_suspend_and_reconnect() -> None:
    h = Harness()
    h.state(KazooState.CONNECTED, (0x11, b"pw"))
    assert h.events == []
    h.state(KazooState.SUSPENDED)
    await h.clock.advance(1.0)
    h.state(KazooState.CONNECTED, (0x11, b"pw"))
    await h.clock.advance(5.0)  # the suspend timer was cancelled
    assert h.events == [SessionEvent.SUSPENDED, SessionEvent.RECONNECTED]


async def test_expiry_reported_by_kazoo_then_new_session() -> None:
    h = Harness()
    h.state(KazooState.CONNECTED, (0x11, b"pw"))
    h.state(KazooState.SUSPENDED)
    h.state(KazooState.LOST)
    h.state(KazooState.CONNECTED, (0x22, b"pw"))
    assert h.events == [SessionEvent.SUSPENDED, SessionEvent.SESSION_LOST, SessionEvent.CONNECTED]
    assert h.w.last_sid == 0x22 and h.restarts == 0


async def test_suspended_past_session_timeout_is_lost_and_old_session_is_restarted() -> None:
    h = Harness()
    h.state(KazooState.CONNECTED, (0x11, b"pw"))
    h.state(KazooState.SUSPENDED)  # kazoo hides client_id now
    await h.clock.advance(2.5)
    assert h.events == [SessionEvent.SUSPENDED, SessionEvent.SESSION_LOST]
    # The server comes back and still knows our session: we already said it is gone, so restart.
    h.state(KazooState.CONNECTED, (0x11, b"pw"))
    assert h.restarts == 1 and h.events[-1] is SessionEvent.SESSION_LOST
    h.state(KazooState.LOST)  # the restart's stop: not reported twice
    h.state(KazooState.CONNECTED, (0x33, b"pw"))
    assert h.events == [SessionEvent.SUSPENDED, SessionEvent.SESSION_LOST, SessionEvent.CONNECTED]


async def test_closed_watcher_ignores_everything() -> None:
    h = Harness()
    h.state(KazooState.CONNECTED, (0x11, b"pw"))
    h.state(KazooState.SUSPENDED)
    h.w.close()
    await h.clock.advance(10)
    h.state(KazooState.LOST)
    assert h.events == [SessionEvent.SUSPENDED]
