"""The metadata store interface.

Theory of operation: Pulsar keeps every piece of cluster state in a
hierarchical key/value store with ZooKeeper's semantics, and so do we.

* Paths are absolute, ``/``-separated, without a trailing slash
  (``/admin/policies/public``).  The root ``/`` always exists.  Parents are
  created implicitly by ``put`` (as Pulsar's MetadataStore does), so
  ``children("/a")`` lists ``b`` after ``put("/a/b/c")``.
* Every node has a value (bytes) and a :class:`Stat`.  ``version`` starts at
  0 on creation and grows by one on every successful put.
* Writes are compare-and-set: ``put(path, value, expected_version)`` with
  ``expected_version=None`` writes unconditionally, ``-1`` requires that the
  node does not exist, ``n >= 0`` requires the current version to be ``n``.
  Failures raise :class:`BadVersion` / :class:`AlreadyExists` / :class:`NotFound`.
* ``ephemeral``/``sequential`` matter only when a put creates the node; an
  update keeps the node's kind and owner.
* Ephemeral nodes belong to the store's session; they vanish when the session
  ends (close, expiry, process death) and other clients see ``DELETED``.
* Sequential puts append a zero-padded 10-digit counter to the path and return
  the final path.
* Notifications: changes are delivered to listeners registered with
  ``add_listener`` as a :class:`Notification` (CREATED, MODIFIED, DELETED on the
  node, CHILDREN_CHANGED on its parent).  Delivery is best-effort and
  ordered per store; after a reconnect listeners must re-read, as with ZK.
  The guarantee (Pulsar's, with ZooKeeper's one-shot watches): a store is
  told about the next change to every path it has read -- ``get``/``exists``
  arm CREATED/MODIFIED/DELETED for that path, ``children`` arms
  CHILDREN_CHANGED -- so read, then listen, then re-read on a notification.
  The embedded backends (memory, RocksDB) deliver every change to every
  session, which is a superset; don't rely on more than the guarantee.
* Session events (``add_session_listener``): CONNECTED, RECONNECTED,
  SUSPENDED (connection lost, session may still be alive), SESSION_LOST
  (expired: every ephemeral node of ours is gone, locks are lost).
  After SESSION_LOST the store establishes a fresh session by itself (as
  kazoo does), emits CONNECTED, and ``session_id`` changes; the store stays
  usable.  Only ``aclose`` makes it unusable (MetadataStoreClosed).
* Ephemeral nodes cannot have children (ZooKeeper's rule): InvalidPath.

All methods are coroutines and never block the event loop; backends that
call blocking libraries do so on an executor.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class MetadataError(Exception):
    """Base class of every metadata-store error."""


class NotFound(MetadataError):
    pass


class BadVersion(MetadataError):
    pass


class AlreadyExists(BadVersion):
    """Create-if-absent (``expected_version=-1``) of a node that exists.

    A subclass of :class:`BadVersion` because it is the same race (someone else
    wrote first), so compare-and-set loops that retry on BadVersion also retry here.
    """


class NotEmpty(MetadataError):
    """Delete (non-recursive) of a node that has children."""


class SessionExpired(MetadataError):
    pass


class MetadataStoreClosed(MetadataError):
    pass


class MetadataTimeout(MetadataError):
    pass


class ConnectionLoss(MetadataError):
    """The store is disconnected from its server (session SUSPENDED); the outcome of
    the operation is unknown.  Retry after RECONNECTED, re-reading first."""


class InvalidPath(MetadataError):
    """A path the store cannot hold (e.g. a child under an ephemeral node)."""


@dataclass(frozen=True, slots=True)
class Stat:
    path: str
    version: int
    creation_time_ms: int
    modification_time_ms: int
    ephemeral: bool = False
    # Opaque id of the session that owns an ephemeral node; None for persistent ones.
    ephemeral_owner: str | None = None


@dataclass(frozen=True, slots=True)
class GetResult:
    value: bytes
    stat: Stat


class NotificationType(enum.Enum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    CHILDREN_CHANGED = "children_changed"


@dataclass(frozen=True, slots=True)
class Notification:
    type: NotificationType
    path: str


class SessionEvent(enum.Enum):
    CONNECTED = "connected"
    RECONNECTED = "reconnected"
    SUSPENDED = "suspended"
    SESSION_LOST = "session_lost"


NotificationListener = Callable[[Notification], None]
SessionListener = Callable[[SessionEvent], None]


@runtime_checkable
class MetadataStore(Protocol):
    async def get(self, path: str) -> GetResult | None:
        """The node's value and stat, or None if it does not exist."""

    async def exists(self, path: str) -> Stat | None: ...

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> Stat:
        """Create or update; see the module comment for CAS rules.  Returns the new stat
        (for sequential puts ``stat.path`` is the created path)."""

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete one node; NotFound if absent, BadVersion on mismatch, NotEmpty if it has children."""

    async def delete_recursive(self, path: str) -> None:
        """Delete a node and everything under it; a missing node is not an error."""

    async def children(self, path: str) -> list[str]:
        """Names (not paths) of direct children, sorted; [] when the node is missing."""

    def add_listener(self, listener: NotificationListener) -> None: ...

    def remove_listener(self, listener: NotificationListener) -> None: ...

    def add_session_listener(self, listener: SessionListener) -> None: ...

    def remove_session_listener(self, listener: SessionListener) -> None: ...

    @property
    def session_id(self) -> str:
        """Identity of this store's session (owner of our ephemeral nodes)."""

    async def aclose(self) -> None:
        """Close; ephemeral nodes of this session go away.  Idempotent."""


def parent_of(path: str) -> str:
    if path == "/":
        raise ValueError("the root has no parent")
    head, _, _ = path.rpartition("/")
    return head or "/"


def join(*parts: str) -> str:
    out = "/".join(p.strip("/") for p in parts if p.strip("/"))
    return "/" + out


def validate_path(path: str) -> None:
    if not path.startswith("/"):
        raise ValueError(f"metadata path must be absolute: {path!r}")
    if path != "/" and path.endswith("/"):
        raise ValueError(f"metadata path must not end with '/': {path!r}")
    if "//" in path:
        raise ValueError(f"metadata path has an empty segment: {path!r}")
    if "\x00" in path:
        raise ValueError(f"metadata path contains a NUL character: {path!r}")
    if any(seg in (".", "..") for seg in path.split("/")):
        raise ValueError(f"metadata path has a relative segment: {path!r}")
