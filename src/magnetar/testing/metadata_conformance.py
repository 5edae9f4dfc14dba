"""Conformance suite for :class:`~magnetar.metadata.api.MetadataStore` backends.

Theory of operation: every backend (memory, RocksDB, ZooKeeper, and wrappers
such as the fault injector with no faults) must behave the same.  A backend
is described by a :class:`MetadataStoreFactory`: ``new_store()`` opens a new
client session on one shared metadata service (several calls model several
processes), ``expire(store)`` (optional) makes the service expire that
store's session.  Each check is an ``async def check_x(ctx)`` working under a
fresh base path, so checks can share one service (a ZooKeeper started once).

Use it whole (``await check_metadata_store(factory)``) or one check per
pytest case (``CHECKS``), as ``tests/conformance/test_metadata_conformance.py``
does.  Waits for asynchronous effects (notifications, ZooKeeper's own
threads) poll with a timeout; nothing sleeps a fixed time to pass.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from magnetar.metadata.api import (
    AlreadyExists,
    BadVersion,
    InvalidPath,
    MetadataError,
    MetadataStore,
    MetadataStoreClosed,
    NotEmpty,
    NotFound,
    Notification,
    NotificationType,
    SessionEvent,
)

WAIT_TIMEOUT_S = 10.0
_run_counter = itertools.count()


@dataclass
class MetadataStoreFactory:
    new_store: Callable[[], Awaitable[MetadataStore]]
    expire: Callable[[MetadataStore], Awaitable[None]] | None = None
    name: str = "backend"


@dataclass
class Ctx:
    factory: MetadataStoreFactory
    base: str
    stores: list[MetadataStore] = field(default_factory=list)

    async def store(self) -> MetadataStore:
        s = await self.factory.new_store()
        self.stores.append(s)
        return s

    def p(self, rel: str) -> str:
        return f"{self.base}/{rel.strip('/')}" if rel.strip("/") else self.base

    async def aclose(self) -> None:
        for s in self.stores:
            try:
                await s.aclose()
            except Exception:  # closing twice or a dead backend must not hide the check's result
                pass


async def wait_until(pred: Callable[[], bool], what: str, timeout_s: float = WAIT_TIMEOUT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.01)


async def wait_until_async(
    pred: Callable[[], Awaitable[bool]], what: str, timeout_s: float = WAIT_TIMEOUT_S
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await pred():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.02)


async def _raises(exc: type[BaseException], aw: Awaitable[object]) -> BaseException:
    try:
        await aw
    except exc as e:
        assert str(e), f"{type(e).__name__} has no message"
        return e
    raise AssertionError(f"expected {exc.__name__}")


# ---- checks ----------------------------------------------------------------------------------


async def check_missing(ctx: Ctx) -> None:
    s = await ctx.store()
    assert await s.get(ctx.p("nope")) is None
    assert await s.exists(ctx.p("nope")) is None
    assert await s.children(ctx.p("nope")) == []


async def check_create_and_read(ctx: Ctx) -> None:
    s = await ctx.store()
    stat = await s.put(ctx.p("a/b/c"), b"v1")
    assert stat.version == 0 and stat.path == ctx.p("a/b/c") and not stat.ephemeral
    got = await s.get(ctx.p("a/b/c"))
    assert got is not None and got.value == b"v1" and got.stat.version == 0
    assert got.stat.creation_time_ms > 0 and got.stat.modification_time_ms >= got.stat.creation_time_ms
    assert await s.children(ctx.p("a")) == ["b"]
    assert await s.children(ctx.p("a/b")) == ["c"]
    assert (await s.exists(ctx.p("a/b"))) is not None
    binary = bytes(range(256)) + b"\x00"
    await s.put(ctx.p("bin"), binary)
    assert (await s.get(ctx.p("bin"))).value == binary  # type: ignore[union-attr]
    await s.put(ctx.p("empty"), b"")
    assert (await s.get(ctx.p("empty"))).value == b""  # type: ignore[union-attr]


async def check_cas_rules(ctx: Ctx) -> None:
    s = await ctx.store()
    path = ctx.p("cas")
    await _raises(NotFound, s.put(path, b"x", 0))
    assert (await s.put(path, b"0", -1)).version == 0
    e = await _raises(AlreadyExists, s.put(path, b"again", -1))
    assert isinstance(e, BadVersion)
    await _raises(BadVersion, s.put(path, b"x", 5))
    assert (await s.put(path, b"1", 0)).version == 1
    await _raises(BadVersion, s.put(path, b"stale", 0))
    assert (await s.put(path, b"2")).version == 2  # unconditional
    got = await s.get(path)
    assert got is not None and got.value == b"2" and got.stat.version == 2


async def check_delete(ctx: Ctx) -> None:
    s = await ctx.store()
    await _raises(NotFound, s.delete(ctx.p("none")))
    await s.put(ctx.p("d/child"), b"c")
    await _raises(NotEmpty, s.delete(ctx.p("d")))
    await _raises(BadVersion, s.delete(ctx.p("d/child"), 3))
    await s.delete(ctx.p("d/child"), 0)
    assert await s.get(ctx.p("d/child")) is None
    assert await s.children(ctx.p("d")) == []
    await s.delete(ctx.p("d"))
    assert await s.exists(ctx.p("d")) is None


async def check_delete_recursive(ctx: Ctx) -> None:
    s = await ctx.store()
    for rel in ("r/a/1", "r/a/2", "r/b", "r/c/d/e", "keep"):
        await s.put(ctx.p(rel), rel.encode())
    await s.delete_recursive(ctx.p("r"))
    assert await s.exists(ctx.p("r")) is None
    assert await s.exists(ctx.p("r/c/d/e")) is None
    assert await s.children(ctx.base) == ["keep"]
    await s.delete_recursive(ctx.p("r"))  # missing: no error


async def check_children_sorted(ctx: Ctx) -> None:
    s = await ctx.store()
    names = ["zeta", "alpha", "m-1", "m-10", "m-2", "Beta"]
    for n in names:
        await s.put(ctx.p(f"kids/{n}"), b"")
    assert await s.children(ctx.p("kids")) == sorted(names)
    await s.put(ctx.p("kids/alpha/grandchild"), b"")
    assert await s.children(ctx.p("kids")) == sorted(names)


async def check_sequential(ctx: Ctx) -> None:
    s = await ctx.store()
    st1 = await s.put(ctx.p("seq/item-"), b"1", sequential=True)
    st2 = await s.put(ctx.p("seq/item-"), b"2", sequential=True)
    prefix = ctx.p("seq/item-")
    for st in (st1, st2):
        assert st.path.startswith(prefix) and len(st.path) == len(prefix) + 10, st.path
        assert st.path[len(prefix) :].isdigit()
    assert int(st2.path[len(prefix) :]) > int(st1.path[len(prefix) :])
    assert (await s.get(st2.path)).value == b"2"  # type: ignore[union-attr]
    await s.delete(st2.path)
    st3 = await s.put(ctx.p("seq/item-"), b"3", sequential=True)
    assert st3.path not in (st1.path, st2.path), "sequential names never repeat"


async def check_ephemeral(ctx: Ctx) -> None:
    a, b = await ctx.store(), await ctx.store()
    assert a.session_id != b.session_id
    st = await a.put(ctx.p("eph/owner"), b"a", ephemeral=True)
    assert st.ephemeral and st.ephemeral_owner == a.session_id
    seen = await b.get(ctx.p("eph/owner"))
    assert seen is not None and seen.stat.ephemeral and seen.stat.ephemeral_owner == a.session_id
    await _raises(InvalidPath, a.put(ctx.p("eph/owner/child"), b""))
    await a.put(ctx.p("eph/persistent"), b"p")
    await a.aclose()
    await wait_until_async(lambda: _absent(b, ctx.p("eph/owner")), "ephemeral node to vanish")
    assert (await b.get(ctx.p("eph/persistent"))) is not None


async def _absent(store: MetadataStore, path: str) -> bool:
    return await store.exists(path) is None


async def check_notifications(ctx: Ctx) -> None:
    a, b = await ctx.store(), await ctx.store()
    seen: list[Notification] = []
    b.add_listener(seen.append)
    await a.put(ctx.p("n"), b"")  # parent exists before we watch its children
    path = ctx.p("n/node")
    # The guarantee: a store hears about paths it has read (reads arm ZooKeeper watches).
    assert await b.get(path) is None
    assert await b.children(ctx.p("n")) == []
    await a.put(path, b"1")
    await wait_until(lambda: Notification(NotificationType.CREATED, path) in seen, "CREATED")
    await wait_until(
        lambda: Notification(NotificationType.CHILDREN_CHANGED, ctx.p("n")) in seen, "CHILDREN_CHANGED"
    )
    assert (await b.get(path)) is not None
    await a.put(path, b"2")
    await wait_until(lambda: Notification(NotificationType.MODIFIED, path) in seen, "MODIFIED")
    assert (await b.get(path)) is not None
    await a.delete(path)
    await wait_until(lambda: Notification(NotificationType.DELETED, path) in seen, "DELETED")
    kinds = [n.type for n in seen if n.path == path]
    assert kinds.index(NotificationType.CREATED) < kinds.index(NotificationType.MODIFIED)
    assert kinds.index(NotificationType.MODIFIED) < kinds.index(NotificationType.DELETED)
    b.remove_listener(seen.append)
    count = len(seen)
    await b.get(path)
    await a.put(path, b"3")
    await a.put(ctx.p("n/sentinel"), b"")
    await asyncio.sleep(0.2)
    assert len(seen) == count, "a removed listener receives nothing"


async def check_session_expiry(ctx: Ctx) -> None:
    if ctx.factory.expire is None:
        return
    a, b = await ctx.store(), await ctx.store()
    events: list[SessionEvent] = []
    a.add_session_listener(events.append)
    old_id = a.session_id
    await a.put(ctx.p("exp/e"), b"", ephemeral=True)
    await ctx.factory.expire(a)
    await wait_until(lambda: SessionEvent.SESSION_LOST in events, "SESSION_LOST")
    await wait_until_async(lambda: _absent(b, ctx.p("exp/e")), "expired session's ephemeral to vanish")
    # The store carries on with a fresh session.
    await wait_until(lambda: a.session_id != old_id, "a new session id")
    await wait_until_async(lambda: _put_ok(a, ctx.p("exp/again")), "store usable after expiry")
    st = await a.put(ctx.p("exp/e2"), b"", ephemeral=True)
    assert st.ephemeral_owner == a.session_id != old_id


async def _put_ok(store: MetadataStore, path: str) -> bool:
    try:
        await store.put(path, b"")
        return True
    except Exception:
        return False


async def check_closed_store(ctx: Ctx) -> None:
    s = await ctx.store()
    await s.put(ctx.p("c"), b"")
    await s.aclose()
    await s.aclose()  # idempotent
    await _raises(MetadataStoreClosed, s.get(ctx.p("c")))
    await _raises(MetadataStoreClosed, s.put(ctx.p("c"), b""))
    await _raises(MetadataStoreClosed, s.children(ctx.base))
    await _raises(MetadataStoreClosed, s.delete(ctx.p("c")))


async def check_invalid_paths(ctx: Ctx) -> None:
    s = await ctx.store()
    for bad in ("relative", ctx.p("x") + "/", ctx.base + "//x", ctx.p("nul\x00"), ctx.p("../x")):
        await _raises(ValueError, s.put(bad, b""))


async def check_concurrent_cas(ctx: Ctx, clients: int = 4, increments: int = 100) -> None:
    stores = [await ctx.store() for _ in range(clients)]
    path = ctx.p("counter")
    await stores[0].put(path, b"0", -1)
    attempts = 0

    async def increment(store: MetadataStore) -> None:
        nonlocal attempts
        while True:
            attempts += 1
            got = await store.get(path)
            assert got is not None
            try:
                await store.put(path, str(int(got.value) + 1).encode(), got.stat.version)
                return
            except BadVersion:
                await asyncio.sleep(0)

    await asyncio.gather(*(increment(stores[i % clients]) for i in range(increments)))
    got = await stores[-1].get(path)
    assert got is not None and int(got.value) == increments, got
    assert got.stat.version == increments


# ---- differential testing: the same random script on two backends gives the same answers ------

_SCRIPT_PATHS = ("a", "a/b", "a/b/c", "a/d", "e", "e/f", "e/f/g")


def random_op_script(rng: Any, n: int) -> list[tuple[Any, ...]]:
    """A seeded list of operations over a few related relative paths (``rng``: runtime.Rng)."""
    ops: list[tuple[Any, ...]] = []
    for i in range(n):
        path = rng.choice(_SCRIPT_PATHS)
        kind = rng.choice(
            ["get", "put", "put", "put_v", "delete", "delete_v", "children", "rdel", "seq", "eph"]
        )
        if kind in ("put_v", "delete_v"):
            ops.append((kind, path, rng.randint(-1, 3)))
        elif kind == "put":
            ops.append((kind, path, f"v{i}".encode()))
        elif kind == "seq":
            ops.append((kind, rng.choice(["s/x-", "a/x-"]), None))
        else:
            ops.append((kind, path, None))
    return ops


async def run_op_script(store: MetadataStore, base: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    """Applies ``ops`` under ``base``; returns comparable outcomes (values, versions, error names)."""
    out: list[Any] = []

    def rel(p: str) -> str:
        return p[len(base) + 1 :]

    for kind, path, arg in ops:
        full = f"{base}/{path}"
        try:
            if kind == "get":
                got = await store.get(full)
                out.append(None if got is None else (got.value, got.stat.version, got.stat.ephemeral))
            elif kind == "put":
                out.append((await store.put(full, arg)).version)
            elif kind == "put_v":
                out.append((await store.put(full, b"cas", arg)).version)
            elif kind == "delete":
                out.append(await store.delete(full))
            elif kind == "delete_v":
                out.append(await store.delete(full, max(arg, 0)))
            elif kind == "children":
                out.append(await store.children(full))
            elif kind == "rdel":
                out.append(await store.delete_recursive(full))
            elif kind == "seq":
                out.append(rel((await store.put(full, b"s", sequential=True)).path))
            elif kind == "eph":
                st = await store.put(full, b"e", -1, ephemeral=True)
                out.append((st.version, st.ephemeral))
        except MetadataError as e:
            out.append(type(e).__name__)
    return out


CHECKS: list[Callable[[Ctx], Awaitable[None]]] = [
    check_missing,
    check_create_and_read,
    check_cas_rules,
    check_delete,
    check_delete_recursive,
    check_children_sorted,
    check_sequential,
    check_ephemeral,
    check_notifications,
    check_session_expiry,
    check_closed_store,
    check_invalid_paths,
    check_concurrent_cas,
]


async def run_check(factory: MetadataStoreFactory, check: Callable[[Ctx], Awaitable[None]]) -> None:
    ctx = Ctx(factory, f"/conformance/{factory.name}-{next(_run_counter)}-{check.__name__}")
    try:
        await check(ctx)
    finally:
        await ctx.aclose()


async def check_metadata_store(factory: MetadataStoreFactory) -> None:
    """Runs every check; raises AssertionError (or the backend's error) on the first failure."""
    for check in CHECKS:
        await run_check(factory, check)
