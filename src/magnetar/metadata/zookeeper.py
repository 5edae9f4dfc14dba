"""The ZooKeeper metadata store (kazoo), for clusters.

Theory of operation: one :class:`ZKMetadataStore` is one kazoo client, i.e.
one ZooKeeper session; its ephemeral nodes belong to that session.

Threads: kazoo runs a connection thread and a callback thread.  We use only
kazoo's ``*_async`` calls; each returns an IAsyncResult whose completion
callback (on kazoo's thread) hands the outcome to an asyncio future through
``loop.call_soon_threadsafe``.  Watch callbacks and session-state callbacks
cross the same way.  Nothing of ours runs on kazoo's threads except those
three-line trampolines, and nothing blocks the loop: ``start``/``stop`` run on
a BlockingExecutor.  Every operation waits at most ``operation_timeout_ms``.

Watches: kazoo 2.11 has no persistent watches, so, as Pulsar's ZK store does,
every read (get, exists, children) arms a one-shot ZooKeeper watch on that
path.  A store is therefore told about changes to paths it has read since
the last notification for them (the guarantee api.py gives; the embedded
backends tell more).  A child watch yields CHILDREN_CHANGED; data watches
yield CREATED/MODIFIED/DELETED.

Session states (kazoo's CONNECTED/SUSPENDED/LOST) become SessionEvents in
:class:`~magnetar.metadata.zk_session.ZKSessionWatcher` (rules there), which
also declares the session lost after a session timeout of disconnection, as
Pulsar does, and has us restart onto a fresh session if kazoo later gets
back onto the one we declared lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from magnetar.metadata import api
from magnetar.metadata.api import (
    GetResult,
    Notification,
    NotificationListener,
    NotificationType,
    SessionEvent,
    SessionListener,
    Stat,
    parent_of,
    validate_path,
)
from magnetar.metadata.listeners import ListenerRegistry
from magnetar.metadata.zk_session import (
    ZKSessionWatcher,
    new_client,
    start_client,
    stop_and_close,
    threadsafe,
)
from magnetar.runtime import BlockingExecutor, Clock, TaskSupervisor

log = logging.getLogger(__name__)

_WATCH_TYPES = {
    EventType.CREATED: NotificationType.CREATED,
    EventType.CHANGED: NotificationType.MODIFIED,
    EventType.DELETED: NotificationType.DELETED,
    EventType.CHILD: NotificationType.CHILDREN_CHANGED,
}


def translate_error(exc: BaseException, path: str) -> BaseException:
    """The one place kazoo's exceptions become metadata errors."""
    table: list[tuple[type[BaseException], type[api.MetadataError], str]] = [
        (kz.NoNodeError, api.NotFound, "does not exist"),
        (kz.NodeExistsError, api.AlreadyExists, "already exists"),
        (kz.BadVersionError, api.BadVersion, "has a different version"),
        (kz.NotEmptyError, api.NotEmpty, "has children"),
        (kz.NoChildrenForEphemeralsError, api.InvalidPath, "parent is ephemeral and cannot have children"),
        (kz.SessionExpiredError, api.SessionExpired, "session expired"),
        (kz.ConnectionLoss, api.ConnectionLoss, "connection to ZooKeeper lost"),
        (kz.ConnectionClosedError, api.ConnectionLoss, "connection to ZooKeeper closed"),
        (kz.OperationTimeoutError, api.MetadataTimeout, "ZooKeeper operation timed out"),
    ]
    for kind, ours, text in table:
        if isinstance(exc, kind):
            return ours(f"{path}: {text}")
    return exc


def session_hex(session_id: int) -> str:
    return f"{session_id:x}"


def to_stat(path: str, zs: ZnodeStat) -> Stat:
    owner = zs.ephemeralOwner
    return Stat(
        path=path,
        version=zs.version,
        creation_time_ms=zs.ctime,
        modification_time_ms=zs.mtime,
        ephemeral=owner != 0,
        ephemeral_owner=session_hex(owner) if owner else None,
    )


class ZKMetadataStore(ListenerRegistry):
    """MetadataStore over one ZooKeeper session.  Create with :meth:`connect`."""

    def __init__(
        self,
        client: KazooClient,
        *,
        clock: Clock,
        session_timeout_ms: int,
        operation_timeout_ms: int,
        executor: BlockingExecutor,
    ) -> None:
        self._client = client
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self.session_timeout_ms = session_timeout_ms
        self.operation_timeout_ms = operation_timeout_ms
        self._executor = executor
        self._closed = False
        self._listeners: list[NotificationListener] = []
        self._session_listeners: list[SessionListener] = []
        self._restarting = False
        self._supervisor = TaskSupervisor("metadata-zk")
        self._watcher = ZKSessionWatcher(
            loop=self._loop,
            clock=clock,
            session_timeout_ms=session_timeout_ms,
            client_id=lambda: client.client_id,
            emit=self._emit,
            restart=self._restart_session,
        )

    @classmethod
    async def connect(
        cls,
        hosts: str,
        *,
        chroot: str = "",
        clock: Clock,
        session_timeout_ms: int = 30_000,
        operation_timeout_ms: int = 30_000,
        connect_timeout_ms: int | None = None,
    ) -> ZKMetadataStore:
        """Connects (creating ``chroot`` if missing); MetadataTimeout if ZooKeeper does not answer."""
        if chroot:
            validate_path(chroot)
        executor = BlockingExecutor("metadata-zk", 1)
        connect_timeout_s = (connect_timeout_ms or operation_timeout_ms) / 1000
        try:
            if chroot and chroot != "/":
                setup = new_client(hosts, session_timeout_ms)
                await start_client(executor, setup, connect_timeout_s, hosts)
                try:
                    await executor.run(setup.ensure_path, chroot)
                finally:
                    await executor.run(stop_and_close, setup)
            client = new_client(hosts + (chroot if chroot != "/" else ""), session_timeout_ms)
            store = cls(
                client,
                clock=clock,
                session_timeout_ms=session_timeout_ms,
                operation_timeout_ms=operation_timeout_ms,
                executor=executor,
            )
            client.add_listener(store._watcher.kazoo_listener)
            await start_client(executor, client, connect_timeout_s, hosts)
        except BaseException:
            await executor.aclose()
            raise
        return store

    # -- identity --------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """Hex session id; while disconnected, the last one we had."""
        cid = self._client.client_id
        if cid:
            return session_hex(cid[0])
        last = self._watcher.last_sid
        return session_hex(last) if last is not None else ""

    @property
    def kazoo_client_id(self) -> tuple[int, bytes] | None:
        """(session id, password): lets a test open a second client on our session to expire it."""
        return self._client.client_id

    @property
    def hosts(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self._client.hosts)

    @property
    def chroot(self) -> str:
        return self._client.chroot or ""

    # -- bridging --------------------------------------------------------------------------------

    async def _call(self, path: str, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise api.MetadataStoreClosed(f"metadata store (ZooKeeper session {self.session_id}) is closed")
        fut: asyncio.Future[Any] = self._loop.create_future()
        loop = self._loop

        def done(result: Any) -> None:  # runs on a kazoo thread
            try:
                value = result.get_nowait()
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                threadsafe(loop, _set_exception, fut, e)
            else:
                threadsafe(loop, _set_result, fut, value)

        try:
            getattr(self._client, method)(*args, **kwargs).rawlink(done)
        except Exception as e:
            raise translate_error(e, path) from e
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the result when the
        # answer and a cancellation of the caller arrive together, losing the cancellation
        # (a loop cancelled that way -- the load-report loop was one -- runs on).
        try:
            async with asyncio.timeout(self.operation_timeout_ms / 1000):
                return await fut
        except TimeoutError:
            raise api.MetadataTimeout(f"{path}: no answer from ZooKeeper in {self.operation_timeout_ms} ms")
        except api.MetadataError:
            raise
        except Exception as e:
            raise translate_error(e, path) from e

    async def _read(self, path: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Reads are idempotent: retry ConnectionLoss (a reconnect, a session restart) until the
        operation timeout.  Writes are never retried here: their outcome is unknown."""
        deadline = self._loop.time() + self.operation_timeout_ms / 1000
        delay_s = 0.02
        while True:
            try:
                return await self._call(path, method, *args, **kwargs)
            except api.ConnectionLoss:
                if self._loop.time() + delay_s > deadline:
                    raise
            await self._clock.sleep(delay_s)
            delay_s = min(delay_s * 2, 0.5)

    # -- MetadataStore ---------------------------------------------------------------------------

    async def get(self, path: str) -> GetResult | None:
        validate_path(path)
        for _ in range(2):
            try:
                value, zs = await self._read(path, "get_async", path, watch=self._data_watch)
            except api.NotFound:
                # Arm a watch so we hear when it appears (Pulsar's cache relies on this).
                if await self.exists(path) is None:
                    return None
                continue
            return GetResult(value, to_stat(path, zs))
        return None

    async def exists(self, path: str) -> Stat | None:
        validate_path(path)
        zs = await self._read(path, "exists_async", path, watch=self._data_watch)
        return None if zs is None else to_stat(path, zs)

    async def children(self, path: str) -> list[str]:
        validate_path(path)
        try:
            names = await self._read(path, "get_children_async", path, watch=self._child_watch)
        except api.NotFound:
            await self.exists(path)
            return []
        return sorted(names)

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> Stat:
        validate_path(path)
        if path == "/":
            raise api.InvalidPath("cannot write the root node")
        value = bytes(value)
        if sequential:
            if expected_version not in (None, -1):
                raise api.BadVersion(f"sequential put of {path} cannot expect version {expected_version}")
            return await self._create(path, value, ephemeral, True)
        if expected_version == -1:
            return await self._create(path, value, ephemeral, False)
        if expected_version is not None:
            zs = await self._call(path, "set_async", path, value, expected_version)
            return to_stat(path, zs)
        for _ in range(16):  # unconditional: update, or create; loop only while racing a delete/create
            try:
                zs = await self._call(path, "set_async", path, value, -1)
                return to_stat(path, zs)
            except api.NotFound:
                pass
            try:
                return await self._create(path, value, ephemeral, False)
            except api.AlreadyExists:
                continue
        raise api.BadVersion(f"{path}: unconditional put kept racing concurrent create/delete")

    async def _create(self, path: str, value: bytes, ephemeral: bool, sequential: bool) -> Stat:
        for _ in range(16):  # a concurrent recursive delete may remove the parent we just made
            try:
                created, zs = await self._call(
                    path,
                    "create_async",
                    path,
                    value,
                    ephemeral=ephemeral,
                    sequence=sequential,
                    include_data=True,
                )
                return to_stat(created, zs)
            except api.NotFound:
                await self._ensure_parents(parent_of(path))
        raise api.NotFound(f"{path}: parent keeps disappearing")

    async def _ensure_parents(self, path: str) -> None:
        if path == "/":
            return
        try:
            await self._call(path, "create_async", path, b"")
        except api.AlreadyExists:
            return
        except api.NotFound:
            await self._ensure_parents(parent_of(path))
            try:
                await self._call(path, "create_async", path, b"")
            except api.AlreadyExists:
                return

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        validate_path(path)
        if path == "/":
            raise api.InvalidPath("cannot delete the root node")
        version = -1 if expected_version is None else expected_version
        await self._call(path, "delete_async", path, version)

    async def delete_recursive(self, path: str) -> None:
        validate_path(path)
        try:
            names = await self._call(path, "get_children_async", path)
        except api.NotFound:
            return
        base = path.rstrip("/")
        await _gather_bounded(self.delete_recursive, [f"{base}/{n}" for n in sorted(names)])
        if path == "/" or (path == "/zookeeper" and not self.chroot):
            return
        try:
            await self._call(path, "delete_async", path, -1)
        except api.NotFound:
            pass
        except api.NotEmpty:  # someone added a child meanwhile: go again
            await self.delete_recursive(path)

    async def aclose(self) -> None:
        """Closes the session: the server deletes our ephemerals before this returns."""
        if self._closed:
            return
        self._closed = True
        self._watcher.close()
        self._client.remove_listener(self._watcher.kazoo_listener)
        await self._supervisor.aclose()
        try:
            await self._executor.run(stop_and_close, self._client)
        finally:
            await self._executor.aclose()

    # -- watches ---------------------------------------------------------------------------------

    def _data_watch(self, event: WatchedEvent) -> None:  # kazoo thread
        self._watch(event)

    def _child_watch(self, event: WatchedEvent) -> None:  # kazoo thread
        self._watch(event)

    def _watch(self, event: WatchedEvent) -> None:
        kind = _WATCH_TYPES.get(event.type)
        if kind is None or event.path is None:
            return  # EventType.NONE: kazoo resetting watches after session loss
        threadsafe(self._loop, self._deliver, Notification(kind, event.path))

    def _deliver(self, note: Notification) -> None:
        if self._closed:
            return
        for listener in list(self._listeners):
            try:
                listener(note)
            except Exception:
                log.exception("metadata listener %r failed on %s", listener, note)

    # -- session state (rules in zk_session.py) ---------------------------------------------------

    def _restart_session(self) -> None:
        """Drops the current session for a new one (ZKSessionWatcher decided it is lost)."""
        if self._restarting or self._closed:
            return
        self._restarting = True

        async def restart() -> None:
            try:
                await self._executor.run(self._client.restart)
            except Exception:
                log.exception("restarting the ZooKeeper client failed")
            finally:
                self._restarting = False

        self._supervisor.spawn(restart(), name="restart-session")

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._session_listeners):
            try:
                listener(event)
            except Exception:
                log.exception("session listener %r failed on %s", listener, event)


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


async def _gather_bounded(fn: Callable[[str], Awaitable[None]], paths: list[str], limit: int = 64) -> None:
    """At most ``limit`` requests in flight (one level of a recursive delete)."""
    for i in range(0, len(paths), limit):
        await asyncio.gather(*(fn(p) for p in paths[i : i + limit]))
