"""Client sessions over an embedded tree (the memory and RocksDB backends).

Theory of operation: a :class:`LocalMetadataServer` owns one
:class:`~magnetar.metadata.local.LocalTree` and hands out any number of
:class:`LocalSessionStore` objects, each a full :class:`MetadataStore` with
its own session id -- so one process (or one simulation) can model several
brokers and bookies sharing a metadata service.  Subclasses decide only how a
tree operation runs (``_read``, ``_write``, ``_write_nowait``): inline for memory, on a one-thread
BlockingExecutor for RocksDB.

Session state machine (one place, ``_transition``)::

    CONNECTED --suspend--> SUSPENDED --resume--> CONNECTED  (emits RECONNECTED)
    CONNECTED|SUSPENDED --expire--> CONNECTED with a new session id
                                   (emits SESSION_LOST then CONNECTED; our ephemerals are gone)
    any --aclose--> CLOSED  (terminal; our ephemerals are deleted)

While SUSPENDED every operation fails with ConnectionLoss; after CLOSED with
MetadataStoreClosed.

Delivery: notifications and session events go into a per-store bounded
queue drained by ``loop.call_soon``, so listeners run after the operation
that caused them returns, in the order the tree applied the changes, and the
same way on every run (the simulator relies on it).  Outside a running loop
(a test calling ``expire_session`` from synchronous code) they run at once.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from magnetar.metadata.api import (
    ConnectionLoss,
    GetResult,
    MetadataStoreClosed,
    Notification,
    NotificationListener,
    SessionEvent,
    SessionListener,
    Stat,
)
from magnetar.metadata.listeners import ListenerRegistry
from magnetar.metadata.local import LocalTree, PutResult
from magnetar.runtime import Clock, RealClock

log = logging.getLogger(__name__)
T = TypeVar("T")

# Undelivered notifications per store before we drop the oldest (and log it).
# Listeners are synchronous, so the queue only grows within one loop iteration.
EVENT_QUEUE_MAX = 100_000


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    CLOSED = "closed"


_TRANSITIONS: dict[tuple[SessionState, str], SessionState] = {
    (SessionState.CONNECTED, "suspend"): SessionState.SUSPENDED,
    (SessionState.SUSPENDED, "resume"): SessionState.CONNECTED,
    (SessionState.CONNECTED, "expire"): SessionState.CONNECTED,
    (SessionState.SUSPENDED, "expire"): SessionState.CONNECTED,
    (SessionState.CONNECTED, "close"): SessionState.CLOSED,
    (SessionState.SUSPENDED, "close"): SessionState.CLOSED,
}


class LocalMetadataServer:
    """Owner of a tree and its sessions.  Subclasses decide how operations run."""

    def __init__(self, tree: LocalTree, *, clock: Clock | None = None, name: str = "local") -> None:
        self.tree = tree
        self.clock: Clock = clock or RealClock()
        self.name = name
        self._next_session = 0
        self._sessions: dict[str, LocalSessionStore] = {}

    # How tree operations run.  Writes publish their notifications even when the
    # awaiting task is cancelled midway (the write happened; others must hear of it).

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    async def _write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        result = fn(*args, **kwargs)
        self._publish(_notes_of(result))
        return result

    def _write_nowait(self, fn: Callable[..., object], *args: Any) -> None:
        self._publish(_notes_of(fn(*args)))

    async def aclose(self) -> None:
        """Closes every session still open (their ephemerals go)."""
        for store in list(self._sessions.values()):
            await store.aclose()

    def _new_session_id(self) -> str:
        self._next_session += 1
        return f"{self.name}-session-{self._next_session}"

    def session(self, session_id: str | None = None) -> LocalSessionStore:
        """A new client session (a MetadataStore).  Ids are deterministic unless given."""
        sid = session_id or self._new_session_id()
        if sid in self._sessions:
            raise ValueError(f"session {sid} already exists")
        store = LocalSessionStore(self, sid)
        self._sessions[sid] = store
        return store

    def session_ids(self) -> list[str]:
        return list(self._sessions)

    def _store(self, session_id: str) -> LocalSessionStore:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise KeyError(f"no live session {session_id!r}") from None

    def expire_session(self, session_id: str) -> None:
        """Test hook: the service expires a session (ephemerals deleted, SESSION_LOST)."""
        self._store(session_id)._expire()

    def suspend_session(self, session_id: str) -> None:
        """Test hook: the client loses its connection; operations raise ConnectionLoss."""
        self._store(session_id)._apply("suspend")

    def resume_session(self, session_id: str) -> None:
        self._store(session_id)._apply("resume")

    def _publish(self, notes: list[Notification]) -> None:
        if not notes:
            return
        for store in list(self._sessions.values()):
            store._enqueue(notes)

    def _rekey(self, old: str, new: str) -> None:
        store = self._sessions.pop(old)
        self._sessions[new] = store

    def _forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)


def _notes_of(result: object) -> list[Notification]:
    if isinstance(result, PutResult):
        return result.notifications
    if isinstance(result, list):
        return result
    return []


class LocalSessionStore(ListenerRegistry):
    """One client session over a :class:`LocalMetadataServer`; implements MetadataStore."""

    def __init__(self, server: LocalMetadataServer, session_id: str) -> None:
        self._server = server
        self._session_id = session_id
        self._state = SessionState.CONNECTED
        self._listeners: list[NotificationListener] = []
        self._session_listeners: list[SessionListener] = []
        self._queue: deque[Notification | SessionEvent] = deque()
        self._flush_scheduled = False
        # Called after the session is closed (the RocksDB factory store closes its database).
        self._on_close: Callable[[], Awaitable[None]] | None = None

    # -- state machine -----------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> str:
        return self._session_id

    def _apply(self, action: str) -> None:
        nxt = _TRANSITIONS.get((self._state, action))
        if nxt is None:
            raise RuntimeError(f"session {self._session_id}: cannot {action} while {self._state.value}")
        self._state = nxt
        if action == "suspend":
            self._enqueue([SessionEvent.SUSPENDED])
        elif action == "resume":
            self._enqueue([SessionEvent.RECONNECTED])

    def _expire(self) -> None:
        self._apply("expire")
        old = self._session_id
        new = self._server._new_session_id()
        self._server._rekey(old, new)
        self._session_id = new
        self._enqueue([SessionEvent.SESSION_LOST, SessionEvent.CONNECTED])
        self._server._write_nowait(self._server.tree.drop_session, old)

    def _check(self) -> None:
        if self._state is SessionState.CLOSED:
            raise MetadataStoreClosed(f"metadata store session {self._session_id} is closed")
        if self._state is SessionState.SUSPENDED:
            raise ConnectionLoss(f"metadata store session {self._session_id} is disconnected")

    # -- MetadataStore -------------------------------------------------------------------------

    async def get(self, path: str) -> GetResult | None:
        self._check()
        return await self._server._read(self._server.tree.get, path)

    async def exists(self, path: str) -> Stat | None:
        self._check()
        return await self._server._read(self._server.tree.exists, path)

    async def children(self, path: str) -> list[str]:
        self._check()
        return await self._server._read(self._server.tree.children, path)

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> Stat:
        self._check()
        result = await self._server._write(
            self._server.tree.put,
            path,
            value,
            expected_version,
            ephemeral_owner=self._session_id if ephemeral else None,
            sequential=sequential,
            now_ms=self._server.clock.time_ms(),
        )
        return result.stat

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        self._check()
        await self._server._write(self._server.tree.delete, path, expected_version)

    async def delete_recursive(self, path: str) -> None:
        self._check()
        await self._server._write(self._server.tree.delete_recursive, path)

    async def aclose(self) -> None:
        if self._state is SessionState.CLOSED:
            return
        self._apply("close")
        self._server._forget(self._session_id)
        self._queue.clear()
        await self._server._write(self._server.tree.drop_session, self._session_id)
        if self._on_close is not None:
            await self._on_close()

    # -- delivery ------------------------------------------------------------------------------

    def _enqueue(self, items: list[Notification] | list[SessionEvent]) -> None:
        if self._state is SessionState.CLOSED:
            return
        self._queue.extend(items)
        while len(self._queue) > EVENT_QUEUE_MAX:
            dropped = self._queue.popleft()
            log.warning("session %s: event queue full, dropped %s", self._session_id, dropped)
        if self._flush_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._flush()
            return
        self._flush_scheduled = True
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, SessionEvent):
                targets: list[Callable[[Any], None]] = list(self._session_listeners)
            else:
                targets = list(self._listeners)
            for listener in targets:
                try:
                    listener(item)
                except Exception:
                    log.exception("metadata listener %r failed on %s", listener, item)
