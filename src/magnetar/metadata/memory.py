"""The in-memory metadata store: the reference backend and the simulator's.

Theory of operation: a :class:`MemoryMetadataServer` is a metadata service
living in this process -- a dict of nodes plus a child index -- and
``server.session()`` opens a client session on it (a full MetadataStore).
Several sessions over one server model several processes sharing one
ZooKeeper: ephemerals of one session vanish for the others when it closes or
when a test calls ``server.expire_session(id)``.

Deterministic by construction: no threads, no tasks, no real time unless you
pass no clock (then timestamps come from RealClock); session ids are
``{name}-session-{n}``; children are listed sorted; notification order is the
order of the writes.  Every operation runs to completion without awaiting, so
check-and-write is atomic on the event loop.
"""

from __future__ import annotations

import bisect

from magnetar.metadata.local import LocalTree, NodeRecord
from magnetar.metadata.session import LocalMetadataServer, LocalSessionStore
from magnetar.runtime import Clock

__all__ = ["MemoryMetadataServer", "MemoryMetadataStore", "MemoryNodeTable"]

MemoryMetadataStore = LocalSessionStore


class MemoryNodeTable:
    """Nodes in a dict; each parent keeps a sorted list of child names."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeRecord] = {}
        self._children: dict[str, list[str]] = {}

    def load(self, path: str) -> NodeRecord | None:
        return self._nodes.get(path)

    def child_names(self, path: str) -> list[str]:
        return list(self._children.get(path, ()))

    def commit(self, writes: list[tuple[str, NodeRecord | None]]) -> None:
        for path, rec in writes:
            if rec is None:
                if self._nodes.pop(path, None) is not None and path != "/":
                    parent, name = _split(path)
                    names = self._children.get(parent)
                    if names is not None:
                        i = bisect.bisect_left(names, name)
                        if i < len(names) and names[i] == name:
                            names.pop(i)
                        if not names:
                            del self._children[parent]
                continue
            if path not in self._nodes and path != "/":
                parent, name = _split(path)
                bisect.insort(self._children.setdefault(parent, []), name)
            self._nodes[path] = rec

    def paths(self) -> list[str]:
        return sorted(self._nodes)


def _split(path: str) -> tuple[str, str]:
    head, _, name = path.rpartition("/")
    return head or "/", name


class MemoryMetadataServer(LocalMetadataServer):
    """An in-process metadata service; ``session()`` returns a MetadataStore."""

    def __init__(self, *, clock: Clock | None = None, name: str = "memory") -> None:
        self._table = MemoryNodeTable()
        super().__init__(LocalTree(self._table), clock=clock, name=name)

    def paths(self) -> list[str]:
        """Every stored path, sorted (for invariant checks and debugging)."""
        return [p for p in self._table.paths() if p != "/"]
