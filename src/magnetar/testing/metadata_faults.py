"""A MetadataStore wrapper that fails, delays or loses operations, by plan.

Theory of operation: :class:`FaultInjectingMetadataStore` wraps any store
and, before each operation, asks a :class:`~magnetar.testing.faults.FaultPlan`
with the operation name and the path (``plan.fail("put", "/ledgers/*",
times=1)``).  Operation names: ``get``, ``exists``, ``children``, ``put``,
``delete``, ``delete_recursive``.  What a firing rule does:

* FAIL  -- raise the rule's error; without one, :class:`ConnectionLoss`
  (what a real store raises most often, and what callers must handle);
* DELAY -- wait ``delay_s`` on the injected clock, then run the operation;
* DROP  -- for writes, the operation *is applied* but its answer is lost
  (ConnectionLoss raised after it) -- ZooKeeper's "did my write happen?"
  case that CAS loops must survive; for reads, ConnectionLoss without
  running it.

Scripted faults are rules with ``after``/``times``; random ones use a plan
built with a seeded Rng and ``probability``.  Listeners, session id and close
pass straight through, so the wrapper passes the conformance suite with an
empty plan.  ``stats`` counts operations by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from magnetar.metadata.api import (
    ConnectionLoss,
    GetResult,
    MetadataStore,
    NotificationListener,
    SessionListener,
    Stat,
)
from magnetar.runtime import Clock, RealClock
from magnetar.testing.faults import FaultAction, FaultPlan

T = TypeVar("T")
WRITES = frozenset({"put", "delete", "delete_recursive"})


class FaultInjectingMetadataStore:
    def __init__(
        self, inner: MetadataStore, plan: FaultPlan | None = None, *, clock: Clock | None = None
    ) -> None:
        self.inner = inner
        self.plan = plan or FaultPlan()
        self._clock = clock or RealClock()
        self.stats: Counter[str] = Counter()

    async def _op(self, operation: str, path: str, run: Callable[[], Awaitable[T]]) -> T:
        self.stats[operation] += 1
        fault = self.plan.check(operation, path)
        if fault is None:
            return await run()
        if fault.action is FaultAction.FAIL:
            if fault.rule.error is None:
                raise ConnectionLoss(f"injected fault: {operation} {path}")
            raise fault.error()
        if fault.action is FaultAction.DELAY:
            await self._clock.sleep(fault.rule.delay_s)
            return await run()
        # DROP
        if operation in WRITES:
            await run()
        raise ConnectionLoss(f"injected fault: {operation} {path} (answer lost)")

    async def get(self, path: str) -> GetResult | None:
        return await self._op("get", path, lambda: self.inner.get(path))

    async def exists(self, path: str) -> Stat | None:
        return await self._op("exists", path, lambda: self.inner.exists(path))

    async def children(self, path: str) -> list[str]:
        return await self._op("children", path, lambda: self.inner.children(path))

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
    ) -> Stat:
        return await self._op(
            "put",
            path,
            lambda: self.inner.put(path, value, expected_version, ephemeral=ephemeral, sequential=sequential),
        )

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        await self._op("delete", path, lambda: self.inner.delete(path, expected_version))

    async def delete_recursive(self, path: str) -> None:
        await self._op("delete_recursive", path, lambda: self.inner.delete_recursive(path))

    def add_listener(self, listener: NotificationListener) -> None:
        self.inner.add_listener(listener)

    def remove_listener(self, listener: NotificationListener) -> None:
        self.inner.remove_listener(listener)

    def add_session_listener(self, listener: SessionListener) -> None:
        self.inner.add_session_listener(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        remove = getattr(self.inner, "remove_session_listener", None)
        if remove is not None:
            remove(listener)

    @property
    def session_id(self) -> str:
        return self.inner.session_id

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        # Backend extras (e.g. ZooKeeper's kazoo_client_id for expiry tests) stay reachable.
        return getattr(self.inner, name)
