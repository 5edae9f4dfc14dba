"""A distributed lock held as an ephemeral node.

Theory of operation: holding the lock on ``path`` means that ``path`` exists
as an ephemeral node owned by our store's session (its value says who holds
it: Pulsar puts the owner's data there, e.g. a broker's URLs for bundle
ownership).  Acquire = create with ``expected_version=-1``; release = delete
with the version we created.  Because the node is ephemeral the lock dies
with the session: a crashed or partitioned holder loses it after the session
timeout and a new session can take it.

State machine (transitions only in ``_set_state``)::

    INIT --acquire ok--> HELD --release--> RELEASED
                          |
                          +--session lost / node deleted or taken over--> LOST

RELEASED and LOST are terminal; acquire again with a new DistributedLock.
The owner learns about LOST through ``add_lost_listener`` callbacks (a
:class:`LockLost` event) and ``wait_lost()``; a broker that gets LockLost for
a bundle must stop serving it.  SUSPENDED (connection lost, session maybe
alive) does not lose the lock -- ZooKeeper keeps it until the session
expires; the ZK store itself reports SESSION_LOST once we have been cut off
longer than the session timeout.

Loss detection: a SESSION_LOST session event while HELD, or a DELETED
notification on our path after which the node is gone or belongs to another
session (checked with ``exists``, which also re-arms the ZooKeeper watch).
One DistributedLock per path per session: two lock objects of one session
cannot tell their nodes apart -- acquire takes over a node that our session
already owns with our value (the answer to our create was lost).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from magnetar.metadata.api import (
    AlreadyExists,
    BadVersion,
    MetadataError,
    MetadataStore,
    NotFound,
    Notification,
    NotificationType,
    SessionEvent,
    Stat,
)
from magnetar.runtime import TaskSupervisor

log = logging.getLogger(__name__)

# While waiting for a busy lock we re-check at least this often, in case a
# notification was missed (a reconnect, or a backend without watches on this path).
RECHECK_INTERVAL_MS = 1_000


class LockBusy(MetadataError):
    """Someone else holds the lock (and did not release it within the wait)."""


class LockState(enum.Enum):
    INIT = "init"
    HELD = "held"
    RELEASED = "released"
    LOST = "lost"


_ALLOWED = {
    (LockState.INIT, LockState.HELD),
    (LockState.HELD, LockState.RELEASED),
    (LockState.HELD, LockState.LOST),
    (LockState.INIT, LockState.RELEASED),  # released before ever acquiring: just closed
}


@dataclass(frozen=True, slots=True)
class LockLost:
    path: str
    reason: str


class DistributedLock:
    def __init__(
        self,
        store: MetadataStore,
        path: str,
        value: bytes = b"",
        *,
        supervisor: TaskSupervisor | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.value = value
        self._state = LockState.INIT
        self._stat: Stat | None = None
        self._owner: str | None = None
        self._lost_listeners: list[Callable[[LockLost], None]] = []
        self._lost_event = asyncio.Event()
        self._changed = asyncio.Event()  # set when our path changes while we wait to acquire
        self._supervisor = supervisor or TaskSupervisor(f"lock:{path}")
        self._own_supervisor = supervisor is None
        self._listening = False
        self.lost_reason: str | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> LockState:
        return self._state

    @property
    def held(self) -> bool:
        return self._state is LockState.HELD

    @property
    def stat(self) -> Stat | None:
        return self._stat

    def _set_state(self, new: LockState) -> None:
        if (self._state, new) not in _ALLOWED:
            raise RuntimeError(f"lock {self.path}: cannot go from {self._state.value} to {new.value}")
        self._state = new

    def add_lost_listener(self, listener: Callable[[LockLost], None]) -> None:
        self._lost_listeners.append(listener)

    async def wait_lost(self, timeout_s: float) -> LockLost:
        """Waits until the lock is lost; TimeoutError if it is still held after ``timeout_s``."""
        async with asyncio.timeout(timeout_s):  # not wait_for: it can swallow a cancellation (3.11)
            await self._lost_event.wait()
        return LockLost(self.path, self.lost_reason or "")

    # -- acquire / release -----------------------------------------------------------------------

    async def try_acquire(self) -> bool:
        if self._state is not LockState.INIT:
            raise RuntimeError(f"lock {self.path} is {self._state.value}; use a new DistributedLock")
        self._listen()
        owner = self.store.session_id
        try:
            stat = await self.store.put(self.path, self.value, -1, ephemeral=True)
        except AlreadyExists:
            # Ours already?  An earlier attempt of this session whose answer was lost
            # (connection loss after the create): take it over, as Pulsar's lock manager does.
            got = await self.store.get(self.path)
            if got is None or got.stat.ephemeral_owner != owner or got.value != self.value:
                return False
            stat = got.stat
        self._stat, self._owner = stat, stat.ephemeral_owner or owner
        self._set_state(LockState.HELD)
        return True

    async def acquire(self, timeout_ms: int = 0) -> None:
        """Takes the lock, waiting up to ``timeout_ms`` for the holder to go; LockBusy otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        quick_retries = 0
        while True:
            self._changed.clear()
            if await self.try_acquire():
                return
            current = await self.store.get(self.path)  # arms the watch on the holder's node
            remaining = deadline - loop.time()
            if current is None and quick_retries < 3:
                quick_retries += 1
                continue  # released between our put and our get: try again at once
            if remaining <= 0:
                holder = current.stat.ephemeral_owner if current is not None else "(just released)"
                raise LockBusy(f"lock {self.path} is held by session {holder}")
            quick_retries = 0
            try:
                async with asyncio.timeout(min(remaining, RECHECK_INTERVAL_MS / 1000)):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def release(self) -> None:
        """Deletes our node (if still ours) and stops listening.  Idempotent."""
        if self._state is LockState.HELD:
            self._set_state(LockState.RELEASED)
            try:
                await self.store.delete(self.path, self._stat.version if self._stat else None)
            except (NotFound, BadVersion):
                pass  # gone or replaced: nothing of ours to delete
            except MetadataError as e:
                log.warning("lock %s: release failed (%s); the session's end will free it", self.path, e)
        elif self._state is LockState.INIT:
            self._set_state(LockState.RELEASED)
        self._unlisten()
        if self._own_supervisor:
            await self._supervisor.aclose()

    async def update_value(self, value: bytes) -> None:
        """Changes the holder data in place (CAS on our version); LockLost-worthy errors propagate."""
        if self._state is not LockState.HELD or self._stat is None:
            raise RuntimeError(f"lock {self.path} is not held")
        self._stat = await self.store.put(self.path, value, self._stat.version)
        self.value = value

    # -- loss detection --------------------------------------------------------------------------

    def _listen(self) -> None:
        if not self._listening:
            self.store.add_listener(self._on_notification)
            self.store.add_session_listener(self._on_session_event)
            self._listening = True

    def _unlisten(self) -> None:
        if self._listening:
            self.store.remove_listener(self._on_notification)
            remove = getattr(self.store, "remove_session_listener", None)
            if remove is not None:
                remove(self._on_session_event)
            self._listening = False

    def _on_notification(self, note: Notification) -> None:
        if note.path != self.path:
            return
        self._changed.set()
        if self._state is LockState.HELD and note.type in (
            NotificationType.DELETED,
            NotificationType.CREATED,
        ):
            self._supervisor.spawn(self._verify(), name="verify")

    def _on_session_event(self, event: SessionEvent) -> None:
        if self._state is not LockState.HELD:
            self._changed.set()
            return
        if event is SessionEvent.SESSION_LOST:
            self._lose("metadata session lost")
        elif event is SessionEvent.RECONNECTED:
            self._supervisor.spawn(self._verify(), name="verify")

    async def _verify(self) -> None:
        try:
            stat = await self.store.exists(self.path)
        except MetadataError as e:
            log.info("lock %s: could not verify ownership (%s); will rely on session events", self.path, e)
            return
        if stat is None:
            self._lose("lock node deleted")
        elif stat.ephemeral_owner != self._owner:
            self._lose(f"lock node now owned by session {stat.ephemeral_owner}")

    def _lose(self, reason: str) -> None:
        if self._state is not LockState.HELD:
            return
        self._set_state(LockState.LOST)
        self.lost_reason = reason
        self._unlisten()
        self._lost_event.set()
        log.warning("lock %s lost: %s", self.path, reason)
        event = LockLost(self.path, reason)
        for listener in list(self._lost_listeners):
            try:
                listener(event)
            except Exception:
                log.exception("LockLost listener %r failed", listener)
