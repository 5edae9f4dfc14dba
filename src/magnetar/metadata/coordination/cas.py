"""Read-modify-write with compare-and-set: the loop every metadata writer needs.

Theory of operation: ``update_with_cas(store, path, modify)`` reads the node,
calls ``modify(current_value_or_None)`` and writes the result with the
version it read (``-1``, i.e. create, when the node was missing).  If
someone else wrote in between the store raises BadVersion (or AlreadyExists
/ NotFound for a concurrent create / delete); we re-read and call ``modify``
again -- so ``modify`` must be a pure function of the value it is given.
After ``max_attempts`` the last conflict is raised as :class:`CasConflict`.

``modify`` returns the new bytes, :data:`NO_CHANGE` to leave the node alone
(no write, no version bump), or :data:`DELETE` to delete it (with the version
read).  It may be a plain function or a coroutine function.  Between
attempts we wait a short, growing, jittered delay on the injected clock
when one is given (many writers hammering one node back off instead of
spinning); without a clock we only yield to the loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar.metadata.api import AlreadyExists, BadVersion, MetadataStore, NotFound, Stat
from magnetar.runtime import Clock, Rng

DEFAULT_MAX_ATTEMPTS = 32


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_CHANGE = _Marker("NO_CHANGE")
DELETE = _Marker("DELETE")

ModifyResult = bytes | _Marker
Modify = Callable[[bytes | None], ModifyResult | Awaitable[ModifyResult]]


class CasConflict(BadVersion):
    """Gave up after ``attempts`` conflicting writes; a BadVersion, so callers that already
    handle BadVersion handle this too."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class CasResult:
    value: bytes | None  # what the node holds now (None: absent / deleted)
    stat: Stat | None
    attempts: int
    changed: bool


async def update_with_cas(
    store: MetadataStore,
    path: str,
    modify: Modify,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ephemeral: bool = False,
    clock: Clock | None = None,
    rng: Rng | None = None,
    backoff_initial_ms: int = 2,
    backoff_max_ms: int = 200,
) -> CasResult:
    """Runs the read-modify-write loop; see the module comment."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be >= 1")
    delay_ms = backoff_initial_ms
    last: BaseException | None = None
    for attempt in range(1, max_attempts + 1):
        got = await store.get(path)
        current, version = (None, -1) if got is None else (got.value, got.stat.version)
        result = modify(current)
        if inspect.isawaitable(result):
            result = await result
        try:
            if result is NO_CHANGE:
                return CasResult(current, None if got is None else got.stat, attempt, False)
            if result is DELETE:
                if got is not None:
                    await store.delete(path, version)
                return CasResult(None, None, attempt, got is not None)
            if not isinstance(result, bytes | bytearray):
                raise TypeError(f"modify must return bytes, NO_CHANGE or DELETE, not {type(result).__name__}")
            stat = await store.put(path, bytes(result), version, ephemeral=ephemeral)
            return CasResult(bytes(result), stat, attempt, True)
        except (BadVersion, AlreadyExists, NotFound) as e:
            last = e
        if clock is not None:
            jitter = rng.uniform(0.5, 1.0) if rng is not None else 1.0
            await clock.sleep(delay_ms * jitter / 1000)
            delay_ms = min(delay_ms * 2, backoff_max_ms)
        else:
            await asyncio.sleep(0)
    raise CasConflict(f"{path}: {max_attempts} conflicting updates in a row (last: {last})", max_attempts)
