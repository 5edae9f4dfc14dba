"""The RocksDB metadata store: embedded, persistent, the standalone default.

Theory of operation: the same tree rules as the memory backend
(:mod:`magnetar.metadata.local`) over a RocksDB database (rocksdict, raw
bytes mode).  Three key families:

* ``n<path>``              -> the node record (header + owner + value);
* ``c<parent>\\0<name>``    -> ``b""``: the child index, so ``children`` is one
  bounded prefix scan instead of a walk over all descendants;
* ``e<path>``              -> owner session id: the ephemeral index.

Every operation's writes go in one WriteBatch with ``sync=True`` (WAL fsynced
before the put returns), so anything acknowledged survives ``kill -9`` and
power loss.  All RocksDB calls run on a one-thread BlockingExecutor: the loop
never blocks, and the single thread serialises check-and-write, which makes
CAS atomic across all sessions of this process.

Sessions do not outlive the process: on open every ephemeral node left in
the database (its owner died with the previous process) is deleted, so a
restart keeps persistent nodes and drops ephemeral ones.  One process owns a
database directory (RocksDB's LOCK file); share it between components
through ``server.session()``.
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Callable
from typing import Any, TypeVar

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from magnetar.metadata.api import MetadataStoreClosed
from magnetar.metadata.local import LocalTree, NodeRecord
from magnetar.metadata.session import LocalMetadataServer, LocalSessionStore, _notes_of
from magnetar.runtime import BlockingExecutor, Clock

__all__ = ["RocksdbMetadataServer", "RocksdbNodeTable"]

T = TypeVar("T")
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
    """NodeTable over a rocksdict database.  Called from one thread only."""

    def __init__(self, db: Rdict) -> None:
        self._db = db
        self._write_opt = WriteOptions()
        self._write_opt.sync = True

    def load(self, path: str) -> NodeRecord | None:
        raw = self._db.get(_NODE + path.encode())
        return None if raw is None else decode_record(raw)

    def child_names(self, path: str) -> list[str]:
        prefix = _CHILD + path.encode() + b"\x00"
        ro = ReadOptions()
        ro.set_iterate_upper_bound(_CHILD + path.encode() + b"\x01")
        return [k[len(prefix) :].decode() for k in self._db.keys(from_key=prefix, read_opt=ro)]

    def commit(self, writes: list[tuple[str, NodeRecord | None]]) -> None:
        batch = WriteBatch(raw_mode=True)
        present: dict[str, bool] = {}
        for path, rec in writes:
            key = _NODE + path.encode()
            existed = present.get(path)
            if existed is None:
                existed = self._db.get(key) is not None
            if rec is None:
                batch.delete(key)
                batch.delete(_EPHEMERAL + path.encode())
                if path != "/":
                    batch.delete(_child_key(*_split(path)))
                present[path] = False
                continue
            batch.put(key, encode_record(rec))
            if not existed and path != "/":
                batch.put(_child_key(*_split(path)), b"")
                if rec.ephemeral_owner is not None:
                    batch.put(_EPHEMERAL + path.encode(), rec.ephemeral_owner.encode())
            present[path] = True
        self._db.write(batch, self._write_opt)

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

    @classmethod
    async def open(cls, path: str, *, clock: Clock, name: str | None = None) -> RocksdbMetadataServer:
        """Opens (creating if needed) the database at ``path`` and drops stale ephemerals."""
        executor = BlockingExecutor("metadata-rocksdb", 1)
        try:
            db, table, stale = await executor.run(_open_db, path)
        except BaseException:
            await executor.aclose()
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
        fut = self._executor.submit_nowait(functools.partial(fn, *args, **kwargs))
        fut.add_done_callback(self._publish_done)
        return await fut

    def _write_nowait(self, fn: Callable[..., object], *args: Any) -> None:
        if self._closed:
            return
        self._executor.submit_nowait(fn, *args).add_done_callback(self._publish_done)

    def _publish_done(self, fut: Any) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self._publish(_notes_of(fut.result()))

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
