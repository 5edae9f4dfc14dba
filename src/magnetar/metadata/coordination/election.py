"""Leader election on one ephemeral node (Pulsar's LeaderElection, e.g. /loadbalance/leader).

Theory of operation: every candidate tries to create ``path`` as an
ephemeral node holding its value (Pulsar: the leader broker's data).  The
one that succeeds leads; the others read the node (which arms a watch on it)
and follow.  When the node goes away -- the leader closed, or its session
expired -- followers hear DELETED and run the election again.

State machine (transitions only in ``_set_state``; listener events in brackets)::

    NO_LEADER --won--> LEADING [BECAME_LEADER]
    NO_LEADER --someone else leads--> FOLLOWING [FOLLOWING]
    LEADING --session lost / our node gone--> NO_LEADER [LOST_LEADERSHIP] -> elect again
    FOLLOWING --leader node deleted / session lost--> NO_LEADER -> elect again
    any --close--> CLOSED (a leader deletes its node first)

A leader that gets LOST_LEADERSHIP must stop acting as leader at once (its
session is gone, so someone else may lead already).  Elections run one at a
time per candidate (an asyncio.Lock); a failed attempt (connection loss,
timeout) is retried every ``retry_interval_ms`` on the injected clock until
it succeeds or the election is closed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from magnetar.metadata.api import (
    AlreadyExists,
    BadVersion,
    MetadataError,
    MetadataStore,
    NotFound,
    Notification,
    NotificationType,
    SessionEvent,
)
from magnetar.runtime import Clock, RealClock, TaskSupervisor

log = logging.getLogger(__name__)


class ElectionState(enum.Enum):
    NO_LEADER = "no_leader"
    LEADING = "leading"
    FOLLOWING = "following"
    CLOSED = "closed"


class LeaderEvent(enum.Enum):
    BECAME_LEADER = "became_leader"
    LOST_LEADERSHIP = "lost_leadership"
    FOLLOWING = "following"


_EVENTS: dict[tuple[ElectionState, ElectionState], LeaderEvent | None] = {
    (ElectionState.NO_LEADER, ElectionState.LEADING): LeaderEvent.BECAME_LEADER,
    (ElectionState.NO_LEADER, ElectionState.FOLLOWING): LeaderEvent.FOLLOWING,
    (ElectionState.LEADING, ElectionState.NO_LEADER): LeaderEvent.LOST_LEADERSHIP,
    (ElectionState.FOLLOWING, ElectionState.NO_LEADER): None,
    (ElectionState.FOLLOWING, ElectionState.FOLLOWING): None,
    (ElectionState.FOLLOWING, ElectionState.LEADING): LeaderEvent.BECAME_LEADER,
    (ElectionState.LEADING, ElectionState.CLOSED): LeaderEvent.LOST_LEADERSHIP,
    (ElectionState.NO_LEADER, ElectionState.CLOSED): None,
    (ElectionState.FOLLOWING, ElectionState.CLOSED): None,
}


class LeaderElection:
    def __init__(
        self,
        store: MetadataStore,
        path: str,
        value: bytes,
        listener: Callable[[LeaderEvent], None] | None = None,
        *,
        clock: Clock | None = None,
        supervisor: TaskSupervisor | None = None,
        retry_interval_ms: int = 1_000,
    ) -> None:
        self.store = store
        self.path = path
        self.value = value
        self._listeners: list[Callable[[LeaderEvent], None]] = [listener] if listener else []
        self._clock = clock or RealClock()
        self._supervisor = supervisor or TaskSupervisor(f"election:{path}")
        self._own_supervisor = supervisor is None
        self.retry_interval_ms = retry_interval_ms
        self._state = ElectionState.NO_LEADER
        self._owner: str | None = None
        self._version: int | None = None
        self._elect_lock = asyncio.Lock()
        self._started = False

    @property
    def state(self) -> ElectionState:
        return self._state

    @property
    def is_leader(self) -> bool:
        return self._state is ElectionState.LEADING

    def add_listener(self, listener: Callable[[LeaderEvent], None]) -> None:
        self._listeners.append(listener)

    def _set_state(self, new: ElectionState) -> None:
        key = (self._state, new)
        if key not in _EVENTS:
            raise RuntimeError(f"election {self.path}: cannot go from {self._state.value} to {new.value}")
        self._state = new
        event = _EVENTS[key]
        if event is None:
            return
        log.info("election %s: %s", self.path, event.value)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("election listener %r failed on %s", listener, event)

    async def start(self) -> ElectionState:
        """Joins the election and runs the first round; returns LEADING or FOLLOWING."""
        if self._started:
            raise RuntimeError(f"election {self.path} already started")
        self._started = True
        self.store.add_listener(self._on_notification)
        self.store.add_session_listener(self._on_session_event)
        await self._elect_until_done()
        return self._state

    async def leader_value(self) -> bytes | None:
        """The current leader's value (ours when leading), or None without a leader."""
        got = await self.store.get(self.path)
        return None if got is None else got.value

    async def close(self) -> None:
        """Leaves the election; a leader deletes its node so a follower takes over at once."""
        if self._state is ElectionState.CLOSED:
            return
        async with self._elect_lock:
            was_leader = self._state is ElectionState.LEADING
            self._set_state(ElectionState.CLOSED)
        self.store.remove_listener(self._on_notification)
        remove = getattr(self.store, "remove_session_listener", None)
        if remove is not None:
            remove(self._on_session_event)
        if was_leader:
            try:
                await self.store.delete(self.path, self._version)
            except (NotFound, BadVersion):
                pass
            except MetadataError as e:
                log.warning("election %s: could not delete leader node (%s)", self.path, e)
        if self._own_supervisor:
            await self._supervisor.aclose()

    # -- rounds ----------------------------------------------------------------------------------

    async def _elect_until_done(self) -> None:
        while self._state is not ElectionState.CLOSED:
            try:
                await self._elect_once()
                return
            except MetadataError as e:
                log.info("election %s: round failed (%s); retrying", self.path, e)
                await self._clock.sleep(self.retry_interval_ms / 1000)

    async def _elect_once(self) -> None:
        async with self._elect_lock:
            if self._state is ElectionState.CLOSED:
                return
            while True:
                try:
                    stat = await self.store.put(self.path, self.value, -1, ephemeral=True)
                except AlreadyExists:
                    got = await self.store.get(self.path)  # arms the watch on the leader's node
                    if got is None:
                        continue  # the leader just went: try again
                    if got.stat.ephemeral_owner == self.store.session_id:
                        # Our own node from before a reconnect: we still lead.
                        self._owner, self._version = got.stat.ephemeral_owner, got.stat.version
                        self._become(ElectionState.LEADING)
                    else:
                        self._become(ElectionState.FOLLOWING)
                    return
                self._owner, self._version = stat.ephemeral_owner, stat.version
                self._become(ElectionState.LEADING)
                return

    def _become(self, new: ElectionState) -> None:
        if self._state is new and new is ElectionState.LEADING:
            return
        self._set_state(new)

    def _on_notification(self, note: Notification) -> None:
        if note.path != self.path or self._state is ElectionState.CLOSED:
            return
        if note.type is NotificationType.DELETED:
            self._spawn(self._after_deleted())
        elif note.type is NotificationType.MODIFIED and self._state is ElectionState.FOLLOWING:
            self._spawn_round()  # re-read re-arms the watch

    def _on_session_event(self, event: SessionEvent) -> None:
        if self._state is ElectionState.CLOSED:
            return
        if event is SessionEvent.SESSION_LOST:
            if self._state is not ElectionState.NO_LEADER:
                self._set_state(ElectionState.NO_LEADER)
        elif event in (SessionEvent.CONNECTED, SessionEvent.RECONNECTED):
            self._spawn_round()

    async def _after_deleted(self) -> None:
        if self._state is ElectionState.LEADING:
            # A DELETED may be stale (an earlier incarnation of the node): check it is really gone.
            try:
                stat = await self.store.exists(self.path)
            except MetadataError:
                stat = None
            if stat is not None and stat.ephemeral_owner == self._owner:
                return
            if self._state is ElectionState.LEADING:
                self._set_state(ElectionState.NO_LEADER)
        await self._elect_until_done()

    def _spawn_round(self) -> None:
        self._spawn(self._elect_until_done())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        if self._supervisor.closed:
            coro.close()
            return
        self._supervisor.spawn(coro, name="elect")
