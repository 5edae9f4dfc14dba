"""A typed, size-bounded, read-through cache over a MetadataStore.

Theory of operation: ``MetadataCache[T]`` maps paths to decoded values
(``T``) with their Stat, as Pulsar's MetadataCache does for policies,
partitioned-topic metadata and the like.

* Read-through: a miss reads the store (which arms a watch on the path, see
  api.py) and caches the result -- absent paths too (negative entries), since
  "no such namespace" is asked as often as the opposite.  Concurrent misses
  for one path share one read (a task owned by the cache's supervisor, so a
  cancelled caller does not cancel the others).
* Invalidation: every notification about a cached path (CREATED, MODIFIED,
  DELETED) drops its entry; a session event (reconnect, loss) drops all of
  them, since watches may have been lost.  A read that was in flight when
  its path was invalidated does not fill the cache with what it read.
* Writes go to the store and invalidate; the next read re-reads (and re-arms
  the ZooKeeper watch -- inserting what we wrote would leave no watch).
* Bounded: at most ``max_entries`` entries, least recently used evicted.
* Values are shared between readers: treat what ``get`` returns as
  immutable.  ``read_modify_update`` hands ``modify`` a freshly decoded copy.

Serialization is per type through a :class:`Serde`.  :class:`JsonSerde`
writes compact JSON like Pulsar's Jackson mapper (``{"partitions":3}``);
:class:`DataclassJsonSerde` maps a dataclass to Pulsar's camelCase field
names, omits None fields and ignores unknown ones (forward compatible with
whatever Pulsar adds).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from magnetar.metadata.api import (
    BadVersion,
    MetadataError,
    MetadataStore,
    MetadataStoreClosed,
    NotFound,
    Notification,
    NotificationType,
    SessionEvent,
    Stat,
)
from magnetar.runtime import TaskSupervisor

T = TypeVar("T")
DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_ATTEMPTS = 32


class MetadataSerdeError(MetadataError):
    """A stored value could not be decoded (or a value could not be encoded)."""


class Serde(Protocol[T]):
    def serialize(self, value: T) -> bytes: ...

    def deserialize(self, path: str, data: bytes) -> T: ...


class BytesSerde:
    def serialize(self, value: bytes) -> bytes:
        return bytes(value)

    def deserialize(self, path: str, data: bytes) -> bytes:
        return data


def _identity(x: Any) -> Any:
    return x


class JsonSerde(Generic[T]):
    """JSON with optional converters to/from plain JSON values."""

    def __init__(
        self, to_json: Callable[[T], Any] = _identity, from_json: Callable[[Any], T] = _identity
    ) -> None:
        self._to_json = to_json
        self._from_json = from_json

    def serialize(self, value: T) -> bytes:
        try:
            return json.dumps(self._to_json(value), separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as e:
            raise MetadataSerdeError(f"cannot encode {type(value).__name__} as JSON: {e}") from e

    def deserialize(self, path: str, data: bytes) -> T:
        try:
            return self._from_json(json.loads(data))
        except (ValueError, TypeError, KeyError) as e:
            raise MetadataSerdeError(f"{path}: stored value is not valid JSON for this type: {e}") from e


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class DataclassJsonSerde(JsonSerde[T]):
    """A flat dataclass <-> JSON object with camelCase keys (``rename`` overrides single fields)."""

    def __init__(self, cls: type[T], rename: dict[str, str] | None = None) -> None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} is not a dataclass")
        rename = rename or {}
        fields = [f.name for f in dataclasses.fields(cls)]
        to_key = {f: rename.get(f, camel_case(f)) for f in fields}
        from_key = {v: k for k, v in to_key.items()}

        def to_json(value: T) -> dict[str, Any]:
            return {to_key[f]: getattr(value, f) for f in fields if getattr(value, f) is not None}

        def from_json(obj: Any) -> T:
            if not isinstance(obj, dict):
                raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
            return cls(**{from_key[k]: v for k, v in obj.items() if k in from_key})

        super().__init__(to_json, from_json)


@dataclass(frozen=True, slots=True)
class CacheEntry(Generic[T]):
    value: T
    stat: Stat


@dataclass(frozen=True, slots=True)
class _Outcome(Generic[T]):
    entry: CacheEntry[T] | None
    error: BaseException | None


class MetadataCache(Generic[T]):
    def __init__(
        self,
        store: MetadataStore,
        serde: Serde[T],
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        supervisor: TaskSupervisor | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.store = store
        self.serde = serde
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CacheEntry[T] | None] = OrderedDict()
        self._loads: dict[str, asyncio.Task[_Outcome[T]]] = {}
        self._supervisor = supervisor or TaskSupervisor("metadata-cache")
        self._own_supervisor = supervisor is None
        self._stats = {"hits": 0, "misses": 0, "evictions": 0, "invalidations": 0}
        store.add_listener(self._on_notification)
        store.add_session_listener(self._on_session_event)
        self._closed = False

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, path: str) -> T | None:
        entry = await self.get_with_stat(path)
        return None if entry is None else entry.value

    async def get_with_stat(self, path: str) -> CacheEntry[T] | None:
        if path in self._entries:
            self._entries.move_to_end(path)
            self._stats["hits"] += 1
            return self._entries[path]
        self._stats["misses"] += 1
        if self._closed:
            raise MetadataStoreClosed(f"metadata cache over {type(self.store).__name__} is closed")
        task = self._loads.get(path)
        if task is None:
            task = self._supervisor.spawn(self._load(path), name=f"load:{path}")
            self._loads[path] = task
        outcome = await asyncio.shield(task)
        if outcome.error is not None:
            raise outcome.error
        return outcome.entry

    async def _load(self, path: str) -> _Outcome[T]:
        """Never raises: errors go to every waiter (and not to the supervisor's error log)."""
        me = asyncio.current_task()
        try:
            got = await self.store.get(path)
            entry = None if got is None else CacheEntry(self.serde.deserialize(path, got.value), got.stat)
        except Exception as e:
            return _Outcome(None, e)
        finally:
            current = self._loads.get(path)
            if current is me:
                del self._loads[path]
        if current is me:  # not invalidated while we were reading
            self._insert(path, entry)
        return _Outcome(entry, None)

    def _insert(self, path: str, entry: CacheEntry[T] | None) -> None:
        self._entries[path] = entry
        self._entries.move_to_end(path)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
            self._stats["evictions"] += 1

    async def exists(self, path: str) -> bool:
        return await self.get_with_stat(path) is not None

    async def children(self, path: str) -> list[str]:
        """Not cached: children lists change too often to be worth it here."""
        return await self.store.children(path)

    # -- writes ----------------------------------------------------------------------------------

    async def create(self, path: str, value: T) -> Stat:
        """Creates the node; AlreadyExists if it exists."""
        try:
            return await self.store.put(path, self.serde.serialize(value), -1)
        finally:
            self.invalidate(path)

    async def put(self, path: str, value: T, expected_version: int | None = None) -> Stat:
        try:
            return await self.store.put(path, self.serde.serialize(value), expected_version)
        finally:
            self.invalidate(path)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        try:
            await self.store.delete(path, expected_version)
        finally:
            self.invalidate(path)

    async def read_modify_update(
        self, path: str, modify: Callable[[T], T], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> T:
        """CAS loop on the cached version; NotFound if the node does not exist."""
        return await self._rmw(path, modify, create=False, max_attempts=max_attempts)  # type: ignore[arg-type]

    async def read_modify_update_or_create(
        self, path: str, modify: Callable[[T | None], T], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> T:
        return await self._rmw(path, modify, create=True, max_attempts=max_attempts)

    async def _rmw(self, path: str, modify: Callable[[T | None], T], *, create: bool, max_attempts: int) -> T:
        last: BaseException | None = None
        for _ in range(max_attempts):
            entry = await self.get_with_stat(path)
            if entry is None and not create:
                raise NotFound(f"{path} does not exist")
            if entry is None:
                current, version = None, -1
            else:
                # A fresh copy for modify: the cached value is shared with readers.
                current = self.serde.deserialize(path, self.serde.serialize(entry.value))
                version = entry.stat.version
            new = modify(current)
            try:
                await self.store.put(path, self.serde.serialize(new), version)
                return new
            except (BadVersion, NotFound) as e:  # AlreadyExists is a BadVersion
                last = e
            finally:
                self.invalidate(path)
        raise BadVersion(f"{path}: {max_attempts} conflicting updates in a row (last: {last})")

    # -- invalidation ----------------------------------------------------------------------------

    def invalidate(self, path: str) -> None:
        self._stats["invalidations"] += 1
        self._entries.pop(path, None)
        self._loads.pop(path, None)  # an in-flight read of the old value will not be cached

    def invalidate_prefix(self, prefix: str) -> None:
        """Drop every entry (and in-flight read) whose path starts with ``prefix``."""
        for path in [p for p in (*self._entries, *self._loads) if p.startswith(prefix)]:
            self.invalidate(path)

    def invalidate_all(self) -> None:
        self._stats["invalidations"] += 1
        self._entries.clear()
        self._loads.clear()

    def _on_notification(self, note: Notification) -> None:
        if note.type is not NotificationType.CHILDREN_CHANGED and (
            note.path in self._entries or note.path in self._loads
        ):
            self.invalidate(note.path)

    def _on_session_event(self, event: SessionEvent) -> None:
        if event is not SessionEvent.SUSPENDED:
            self.invalidate_all()

    def statistics(self) -> dict[str, int]:
        return {**self._stats, "entries": len(self._entries), "loading": len(self._loads)}

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.store.remove_listener(self._on_notification)
        remove = getattr(self.store, "remove_session_listener", None)
        if remove is not None:
            remove(self._on_session_event)
        self.invalidate_all()
        if self._own_supervisor:
            await self._supervisor.aclose()
