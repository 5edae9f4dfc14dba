"""The node tree shared by the embedded backends (memory and RocksDB).

Theory of operation: ZooKeeper's rules (compare-and-set versions, implicit
parents, sequential names, ephemeral owners, no children under ephemerals)
are written once here, in :class:`LocalTree`, over a tiny storage seam
(:class:`NodeTable`): load a node, list child names, commit a batch of node
writes/deletes atomically.  The memory backend's table is two dicts; the
RocksDB backend's table is a database with a child index.

Every tree operation is synchronous and returns the notifications it causes;
the caller runs it either inline (memory: no await between check and write,
so it is atomic on the event loop) or on a single-threaded executor (RocksDB:
the one thread serialises operations), then fans the notifications out on the
event loop.  Nothing here touches the loop, a clock or a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from magnetar.metadata.api import (
    AlreadyExists,
    BadVersion,
    GetResult,
    InvalidPath,
    NotEmpty,
    NotFound,
    Notification,
    NotificationType,
    Stat,
    parent_of,
    validate_path,
)

SEQUENCE_DIGITS = 10


@dataclass(frozen=True, slots=True)
class NodeRecord:
    value: bytes
    version: int
    creation_time_ms: int
    modification_time_ms: int
    ephemeral_owner: str | None = None
    # Bumped on every child creation; sequential names are drawn from it, so they
    # never repeat under one parent and match the numbers ZooKeeper hands out
    # (its sequence counter advances on creates, not on deletes).
    cversion: int = 0

    def stat(self, path: str) -> Stat:
        return Stat(
            path=path,
            version=self.version,
            creation_time_ms=self.creation_time_ms,
            modification_time_ms=self.modification_time_ms,
            ephemeral=self.ephemeral_owner is not None,
            ephemeral_owner=self.ephemeral_owner,
        )


class NodeTable(Protocol):
    """Storage seam: point reads plus one atomic batch write."""

    def load(self, path: str) -> NodeRecord | None: ...

    def child_names(self, path: str) -> list[str]:
        """Sorted names of the direct children of ``path``."""

    def commit(self, writes: list[tuple[str, NodeRecord | None]]) -> None:
        """Apply writes in order, atomically; ``None`` deletes.  Keeps the child index."""


@dataclass(slots=True)
class PutResult:
    stat: Stat
    notifications: list[Notification]


ROOT = NodeRecord(b"", 0, 0, 0)


class LocalTree:
    """ZooKeeper semantics over a :class:`NodeTable`.  Not thread-safe: callers serialise."""

    def __init__(self, table: NodeTable) -> None:
        self._table = table
        # owner session id -> paths of its ephemeral nodes (insertion ordered).
        self._ephemerals: dict[str, dict[str, None]] = {}

    # -- reads -------------------------------------------------------------------------------

    def _load(self, path: str) -> NodeRecord | None:
        if path == "/":
            return self._table.load("/") or ROOT
        return self._table.load(path)

    def get(self, path: str) -> GetResult | None:
        validate_path(path)
        rec = self._load(path)
        return None if rec is None else GetResult(rec.value, rec.stat(path))

    def exists(self, path: str) -> Stat | None:
        validate_path(path)
        rec = self._load(path)
        return None if rec is None else rec.stat(path)

    def children(self, path: str) -> list[str]:
        validate_path(path)
        return self._table.child_names(path)

    # -- writes ------------------------------------------------------------------------------

    def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None,
        *,
        ephemeral_owner: str | None,
        sequential: bool,
        now_ms: int,
    ) -> PutResult:
        validate_path(path)
        if path == "/":
            raise InvalidPath("cannot write the root node")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"metadata values are bytes, got {type(value).__name__}")
        value = bytes(value)
        writes: list[tuple[str, NodeRecord | None]] = []
        notes: list[Notification] = []
        if expected_version is not None and expected_version >= 0 and not sequential:
            # A versioned update needs the node itself; its parents are not our concern
            # (ZooKeeper's setData: NotFound even under an ephemeral parent).
            current = self._load(path)
            if current is None:
                raise NotFound(f"{path} does not exist (expected version {expected_version})")
        parent = parent_of(path)
        parent_rec = self._ensure_parents(parent, now_ms, writes, notes)
        if sequential:
            if expected_version not in (None, -1):
                raise BadVersion(f"sequential put of {path} cannot expect version {expected_version}")
            path = f"{path}{parent_rec.cversion:0{SEQUENCE_DIGITS}d}"
            expected_version = -1
        current = self._load(path)
        if current is None:
            if expected_version is not None and expected_version >= 0:
                raise NotFound(f"{path} does not exist (expected version {expected_version})")
            rec = NodeRecord(value, 0, now_ms, now_ms, ephemeral_owner)
            writes.append((path, rec))
            writes.append((parent, replace(parent_rec, cversion=parent_rec.cversion + 1)))
            notes.append(Notification(NotificationType.CREATED, path))
            notes.append(Notification(NotificationType.CHILDREN_CHANGED, parent))
        else:
            if expected_version == -1:
                raise AlreadyExists(f"{path} already exists (version {current.version})")
            if expected_version is not None and expected_version != current.version:
                raise BadVersion(f"{path} is at version {current.version}, expected {expected_version}")
            # An update keeps the node's kind: a persistent node stays persistent.
            rec = replace(current, value=value, version=current.version + 1, modification_time_ms=now_ms)
            writes.append((path, rec))
            notes.append(Notification(NotificationType.MODIFIED, path))
        self._table.commit(writes)
        if current is None and ephemeral_owner is not None:
            self._ephemerals.setdefault(ephemeral_owner, {})[path] = None
        return PutResult(rec.stat(path), notes)

    def _ensure_parents(
        self, parent: str, now_ms: int, writes: list[tuple[str, NodeRecord | None]], notes: list[Notification]
    ) -> NodeRecord:
        """Returns the parent's record, queueing creation of missing ancestors (empty values)."""
        missing: list[str] = []
        p = parent
        rec = self._load(p)
        while rec is None:
            missing.append(p)
            p = parent_of(p)
            rec = self._load(p)
        if rec.ephemeral_owner is not None:
            raise InvalidPath(f"{p} is ephemeral and cannot have children")
        for m in reversed(missing):
            writes.append((p, replace(rec, cversion=rec.cversion + 1)))
            notes.append(Notification(NotificationType.CREATED, m))
            notes.append(Notification(NotificationType.CHILDREN_CHANGED, p))
            p, rec = m, NodeRecord(b"", 0, now_ms, now_ms)
            writes.append((m, rec))
        return rec

    def delete(self, path: str, expected_version: int | None) -> list[Notification]:
        validate_path(path)
        if path == "/":
            raise InvalidPath("cannot delete the root node")
        current = self._load(path)
        if current is None:
            raise NotFound(f"{path} does not exist")
        if expected_version is not None and expected_version != current.version:
            raise BadVersion(f"{path} is at version {current.version}, expected {expected_version}")
        if self._table.child_names(path):
            raise NotEmpty(f"{path} has children")
        return self._delete_nodes([path])

    def delete_recursive(self, path: str) -> list[Notification]:
        validate_path(path)
        order: list[str] = []
        self._post_order(path, order)
        if path == "/":
            order = order[:-1]
        return self._delete_nodes(order) if order else []

    def _post_order(self, path: str, out: list[str]) -> None:
        if self._load(path) is None:
            return
        for name in self._table.child_names(path):
            self._post_order(path.rstrip("/") + "/" + name, out)
        out.append(path)

    def _delete_nodes(self, paths: list[str]) -> list[Notification]:
        """Deletes nodes given children-first.  Parents' cversions stay: sequential names
        count child creations only, which is what ZooKeeper hands out in practice."""
        writes: list[tuple[str, NodeRecord | None]] = []
        notes: list[Notification] = []
        gone = set(paths)
        touched_parents: dict[str, None] = {}
        for path in paths:
            rec = self._load(path)
            writes.append((path, None))
            notes.append(Notification(NotificationType.DELETED, path))
            touched_parents[parent_of(path)] = None
            if rec is not None and rec.ephemeral_owner is not None:
                self._ephemerals.get(rec.ephemeral_owner, {}).pop(path, None)
        for parent in touched_parents:
            if parent not in gone:
                notes.append(Notification(NotificationType.CHILDREN_CHANGED, parent))
        self._table.commit(writes)
        return notes

    def drop_session(self, owner: str) -> list[Notification]:
        """Deletes every ephemeral node owned by ``owner`` (session closed or expired)."""
        paths = list(self._ephemerals.pop(owner, {}))
        live = [p for p in paths if self._load(p) is not None]
        return self._delete_nodes(live) if live else []

    def adopt_ephemeral(self, path: str, owner: str) -> None:
        """Registers an ephemeral found in storage (used by RocksDB recovery)."""
        self._ephemerals.setdefault(owner, {})[path] = None

    def ephemeral_paths(self, owner: str) -> list[str]:
        return list(self._ephemerals.get(owner, {}))
