"""The RocksDB metadata store: embedded, persistent, the standalone default.

Theory of operation: the same tree rules as the memory backend
(:mod:`magnetar.metadata.local`) over a RocksDB database (rocksdict, raw
bytes mode).  Three key families:

* ``n<path>``              -> the node record (header + owner + value);
* ``c<parent>\\0<name>``    -> ``b""``: the child index, so ``children`` is one
  bounded prefix scan instead of a walk over all descendants;
* ``e<path>``              -> owner session id: the ephemeral index.

Writes are group-committed: operations that arrive while a group is being
written queue up, and the next group applies them one after another (each
sees the previous ones through an overlay) and makes them durable with ONE
WriteBatch written with ``sync=True`` (WAL fsynced) before any of them is
acknowledged -- so anything acknowledged survives ``kill -9`` and power
loss, and many concurrent writers share an fsync.  All RocksDB calls run on
a one-thread BlockingExecutor: the loop never blocks, and the single thread
serialises check-and-write, which makes CAS atomic across all sessions of
this process.

Sessions do not outlive the process: on open every ephemeral node left in
the database (its owner died with the previous process) is deleted, so a
restart keeps persistent nodes and drops ephemeral ones.  One process owns a
database directory (RocksDB's LOCK file); share it between components
through ``server.session()``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import struct
from collections.abc import Callable
from typing import Any, TypeVar

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from magnetar.metadata.api import MetadataError, MetadataStoreClosed
from magnetar.metadata.local import LocalTree, NodeRecord
from magnetar.metadata.session import LocalMetadataServer, LocalSessionStore, _notes_of
from magnetar.runtime import BlockingExecutor, Clock

__all__ = ["RocksdbMetadataServer", "RocksdbNodeTable"]

T = TypeVar("T")
log = logging.getLogger(__name__)
# Operations applied per group commit (one synced RocksDB write); the rest wait for the next.
GROUP_OPS_MAX = 1_000
_HEADER = struct.Struct(">qqqqH")  # version, ctime_ms, mtime_ms, cversion, owner length
_NODE, _CHILD, _EPHEMERAL = b"n", b"c", b"e"


def encode_record(rec: NodeRecord) -> bytes:
    owner = (rec.ephemeral_owner or "").encode()
    head = _HEADER.pack(rec.version, rec.creation_time_ms, rec.modification_time_ms, rec.cversion, len(owner))
    return head + owner + rec.value


def decode_record(raw: bytes) -> NodeRecord:
    version, ctime, mtime, cversion, owner_len = _HEADER.unpack_from(raw)
    start = _HEADER.size
    owner = raw[start : start + owner_len].decode() if owner_len else None
    return NodeRecord(raw[start + owner_len :], version, ctime, mtime, owner, cversion)


def _split(path: str) -> tuple[str, str]:
    head, _, name = path.rpartition("/")
    return head or "/", name


def _child_key(parent: str, name: str) -> bytes:
    return _CHILD + parent.encode() + b"\x00" + name.encode()


class RocksdbNodeTable:
    """NodeTable over a rocksdict database.  Called from one thread only.

    Group commit: between ``begin_group`` and ``end_group`` commits go into
    one WriteBatch and an overlay that ``load``/``child_names`` consult, so
    later operations of the group see earlier ones; ``end_group`` makes it
    durable with one synced write.  Outside a group each commit is written
    (and synced) at once.
    """

    def __init__(self, db: Rdict) -> None:
        self._db = db
        self._write_opt = WriteOptions()
        self._write_opt.sync = True
        self._batch: WriteBatch | None = None
        self._nodes: dict[str, NodeRecord | None] = {}  # overlay: path -> record / deleted
        self._kids: dict[str, dict[str, bool]] = {}  # overlay: parent -> name -> present
        self.synced_writes = 0

    def load(self, path: str) -> NodeRecord | None:
        if path in self._nodes:
            return self._nodes[path]
        raw = self._db.get(_NODE + path.encode())
        return None if raw is None else decode_record(raw)

    def child_names(self, path: str) -> list[str]:
        prefix = _CHILD + path.encode() + b"\x00"
        ro = ReadOptions()
        ro.set_iterate_upper_bound(_CHILD + path.encode() + b"\x01")
        names = [k[len(prefix) :].decode() for k in self._db.keys(from_key=prefix, read_opt=ro)]
        changes = self._kids.get(path)
        if not changes:
            return names
        present = set(names)
        for name, there in changes.items():
            if there:
                present.add(name)
            else:
                present.discard(name)
        return sorted(present)

    def begin_group(self) -> None:
        self._batch = WriteBatch(raw_mode=True)

    def end_group(self) -> None:
        batch, self._batch = self._batch, None
        try:
            if batch is not None and len(batch) > 0:
                self._db.write(batch, self._write_opt)
                self.synced_writes += 1
        finally:
            self._nodes.clear()
            self._kids.clear()

    def commit(self, writes: list[tuple[str, NodeRecord | None]]) -> None:
        batch = self._batch if self._batch is not None else WriteBatch(raw_mode=True)
        for path, rec in writes:
            key = _NODE + path.encode()
            existed = self.load(path) is not None
            self._nodes[path] = rec
            if rec is None:
                batch.delete(key)
                batch.delete(_EPHEMERAL + path.encode())
                if path != "/":
                    batch.delete(_child_key(*_split(path)))
                    self._kid(path, False)
                continue
            batch.put(key, encode_record(rec))
            if not existed and path != "/":
                batch.put(_child_key(*_split(path)), b"")
                self._kid(path, True)
                if rec.ephemeral_owner is not None:
                    batch.put(_EPHEMERAL + path.encode(), rec.ephemeral_owner.encode())
        if self._batch is None:
            try:
                self._db.write(batch, self._write_opt)
                self.synced_writes += 1
            finally:
                self._nodes.clear()
                self._kids.clear()

    def _kid(self, path: str, present: bool) -> None:
        parent, name = _split(path)
        self._kids.setdefault(parent, {})[name] = present

    def ephemerals(self) -> list[tuple[str, str]]:
        ro = ReadOptions()
        ro.set_iterate_upper_bound(bytes([_EPHEMERAL[0] + 1]))
        return [(k[1:].decode(), v.decode()) for k, v in self._db.items(from_key=_EPHEMERAL, read_opt=ro)]


class RocksdbMetadataServer(LocalMetadataServer):
    """A RocksDB-backed metadata service for this process; ``session()`` opens a client."""

    def __init__(
        self, db: Rdict, table: RocksdbNodeTable, executor: BlockingExecutor, *, clock: Clock, name: str
    ) -> None:
        super().__init__(LocalTree(table), clock=clock, name=name)
        self.path = db.path()
        self._db = db
        self._table = table
        self._executor = executor
        self._closing = False
        self._closed = False
        self._pending: list[tuple[Callable[[], Any], asyncio.Future[Any] | None]] = []
        self._group_running = False

    @classmethod
    async def open(cls, path: str, *, clock: Clock, name: str | None = None) -> RocksdbMetadataServer:
        """Opens (creating if needed) the database at ``path`` and drops stale ephemerals."""
        executor = BlockingExecutor("metadata-rocksdb", 1)
        try:
            db, table, stale = await executor.run(_open_db, path)
        except BaseException as e:
            await executor.aclose()
            if isinstance(e, Exception) and not isinstance(e, MetadataError):
                # rocksdict raises bare Exceptions ("IO error: lock hold by ...", corruption).
                raise MetadataError(f"cannot open metadata database {path}: {e}") from e
            raise
        server = cls(db, table, executor, clock=clock, name=name or f"rocksdb-{clock.time_ms()}")
        for owner in sorted({o for _, o in stale}):
            for p, o in stale:
                if o == owner:
                    server.tree.adopt_ephemeral(p, owner)
            await server._write(server.tree.drop_session, owner)
        return server

    def session(self, session_id: str | None = None, *, owns_server: bool = False) -> LocalSessionStore:
        """A client session; with ``owns_server`` closing it also closes the database."""
        if self._closed:
            raise MetadataStoreClosed(f"metadata database {self.path} is closed")
        store = super().session(session_id)
        if owns_server:
            store._on_close = self.aclose
        return store

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise MetadataStoreClosed(f"metadata database {self.path} is closed")
        return await self._executor.run(fn, *args)

    async def _write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise MetadataStoreClosed(f"metadata database {self.path} is closed")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((functools.partial(fn, *args, **kwargs), fut))
        self._kick()
        return await fut  # a cancelled caller's write still applies and is still announced

    def _write_nowait(self, fn: Callable[..., object], *args: Any) -> None:
        if self._closed:
            return
        self._pending.append((functools.partial(fn, *args), None))
        self._kick()

    def _kick(self) -> None:
        """Starts the next group commit unless one is running (one at a time, FIFO)."""
        if self._group_running or not self._pending:
            return
        group, self._pending = self._pending[:GROUP_OPS_MAX], self._pending[GROUP_OPS_MAX:]
        self._group_running = True
        job = self._executor.submit_nowait(self._apply_group, [call for call, _ in group])
        job.add_done_callback(functools.partial(self._group_done, group))

    def _apply_group(self, calls: list[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """Executor thread: run each operation against the overlay, then one synced write."""
        self._table.begin_group()
        results: list[tuple[bool, Any]] = []
        for call in calls:
            try:
                results.append((True, call()))
            except Exception as e:  # an operation's own error (BadVersion...): its caller gets it
                results.append((False, e))
        try:
            self._table.end_group()
        except Exception as e:
            log.error("metadata database %s: group write failed: %s", self.path, e)
            return [(False, e if ok else r) for ok, r in results]
        return results

    def _group_done(
        self, group: list[tuple[Callable[[], Any], asyncio.Future[Any] | None]], job: Any
    ) -> None:
        self._group_running = False
        if job.cancelled() or job.exception() is not None:
            err = job.exception() if not job.cancelled() else MetadataStoreClosed("metadata database closed")
            outcomes: list[tuple[bool, Any]] = [(False, err)] * len(group)
        else:
            outcomes = job.result()
        for (_, fut), (ok, value) in zip(group, outcomes, strict=True):
            if ok:
                self._publish(_notes_of(value))
            if fut is None or fut.done():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)
        self._kick()

    def statistics(self) -> dict[str, int]:
        return {"synced_writes": self._table.synced_writes, "pending": len(self._pending)}

    async def aclose(self) -> None:
        """Closes every session (dropping their ephemerals), then the database.  Idempotent."""
        if self._closing:
            return
        self._closing = True
        await super().aclose()
        self._closed = True
        await self._executor.run(self._db.close)
        await self._executor.aclose()


def _open_db(path: str) -> tuple[Rdict, RocksdbNodeTable, list[tuple[str, str]]]:
    os.makedirs(path, exist_ok=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, options=opts)
    table = RocksdbNodeTable(db)
    return db, table, table.ephemerals()
