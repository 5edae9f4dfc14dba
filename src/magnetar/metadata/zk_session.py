"""ZooKeeper sessions: kazoo client lifecycle, and session state -> our SessionEvents.

Theory of operation: kazoo reports CONNECTED / SUSPENDED / LOST on its
connection thread; :meth:`ZKSessionWatcher.kazoo_listener` only hops onto the
event loop (``call_soon_threadsafe``) and :meth:`on_state` decides there.
The rules, all in ``on_state``:

* SUSPENDED -> emit SUSPENDED and start a timer of one session timeout.  If
  it fires while still suspended, the server has expired us even though we
  cannot hear it (Pulsar's ZKSessionWatcher does the same): emit SESSION_LOST.
* LOST (kazoo learnt on reconnect that the session expired) -> emit
  SESSION_LOST unless already emitted for that session.
* CONNECTED:
  - on the very session we already declared lost -> restart the client (our
    ephemerals must really go, or SESSION_LOST would be a lie); emit nothing,
    the restart's CONNECTED follows;
  - after SUSPENDED, same session, nothing declared lost -> RECONNECTED;
  - otherwise (a fresh session after a loss) -> CONNECTED.
  The first CONNECTED (at connect time) is not emitted: the store is connected
  when ``connect`` returns.

kazoo only exposes ``client_id`` while connected, so we remember the last
session id we saw (``last_sid``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import KazooState

from magnetar.metadata import api
from magnetar.metadata.api import SessionEvent
from magnetar.runtime import BlockingExecutor, Clock, TimerHandle

log = logging.getLogger(__name__)


def threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: object) -> None:
    """Schedules ``fn(*args)`` on ``loop`` from any thread; a closed loop drops it."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass  # the loop is closed: nobody is listening any more


class ZKSessionWatcher:
    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        session_timeout_ms: int,
        client_id: Callable[[], tuple[int, bytes] | None],
        emit: Callable[[SessionEvent], None],
        restart: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._clock = clock
        self.session_timeout_ms = session_timeout_ms
        self._client_id = client_id
        self._emit = emit
        self._restart = restart
        self._kazoo_state: KazooState | None = None
        self._lost_reported_sid: int | None = None
        self._suspend_timer: TimerHandle | None = None
        self._seen_connected = False
        self._closed = False
        self.last_sid: int | None = None

    def kazoo_listener(self, state: KazooState) -> None:  # kazoo connection thread: never block
        threadsafe(self._loop, self.on_state, state)

    def on_state(self, state: KazooState) -> None:
        if self._closed:
            return
        previous, self._kazoo_state = self._kazoo_state, state
        cid = self._client_id()
        sid = cid[0] if cid else self.last_sid
        if state == KazooState.SUSPENDED:
            self._emit(SessionEvent.SUSPENDED)
            self._arm_suspend_timer(sid)
        elif state == KazooState.LOST:
            self._cancel_suspend_timer()
            if self._lost_reported_sid is None or self._lost_reported_sid != sid:
                self._lost_reported_sid = sid if sid is not None else -1
                self._emit(SessionEvent.SESSION_LOST)
        elif state == KazooState.CONNECTED:
            self._cancel_suspend_timer()
            self.last_sid = sid
            if sid is not None and sid == self._lost_reported_sid:
                self._restart()
                return
            if previous == KazooState.SUSPENDED and self._lost_reported_sid is None:
                self._emit(SessionEvent.RECONNECTED)
            elif self._seen_connected:
                self._lost_reported_sid = None
                self._emit(SessionEvent.CONNECTED)
            self._seen_connected = True

    def _arm_suspend_timer(self, sid: int | None) -> None:
        self._cancel_suspend_timer()

        def expired() -> None:
            self._suspend_timer = None
            if self._closed or self._kazoo_state != KazooState.SUSPENDED:
                return
            log.warning("ZooKeeper unreachable for longer than the session timeout: session lost")
            self._lost_reported_sid = sid if sid is not None else -1
            self._emit(SessionEvent.SESSION_LOST)

        self._suspend_timer = self._clock.call_later(self.session_timeout_ms / 1000, expired)

    def _cancel_suspend_timer(self) -> None:
        if self._suspend_timer is not None:
            self._suspend_timer.cancel()
            self._suspend_timer = None

    def close(self) -> None:
        self._closed = True
        self._cancel_suspend_timer()


# -- client lifecycle ------------------------------------------------------------------------------


def new_client(hosts: str, session_timeout_ms: int) -> KazooClient:
    return KazooClient(
        hosts=hosts,
        timeout=session_timeout_ms / 1000,
        handler=SequentialThreadingHandler(),
        connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
        randomize_hosts=True,
        logger=logging.getLogger("magnetar.metadata.kazoo"),
    )


async def start_client(executor: BlockingExecutor, client: KazooClient, timeout_s: float, hosts: str) -> None:
    try:
        await executor.run(client.start, timeout_s)
    except Exception as e:
        await executor.run(stop_and_close, client)
        raise api.MetadataTimeout(f"could not connect to ZooKeeper at {hosts} within {timeout_s:.1f}s: {e!r}")


def stop_and_close(client: KazooClient) -> None:
    client.stop()
    client.close()
