"""Memory backend specifics: shared server, sessions, test hooks, determinism, factory URLs."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata.api import (
    ConnectionLoss,
    MetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
)
from magnetar.metadata.factory import create_metadata_store, parse_metadata_url
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock


class FixedClock(RealClock):
    def __init__(self) -> None:
        self.now_ms = 1_000

    def time_ms(self) -> int:
        return self.now_ms


async def test_sessions_share_one_tree_and_implement_the_protocol() -> None:
    server = MemoryMetadataServer()
    a, b = server.session(), server.session()
    assert isinstance(a, MetadataStore)
    await a.put("/x/y", b"1")
    assert (await b.get("/x/y")).value == b"1"
    assert server.paths() == ["/x", "/x/y"]
    assert server.session_ids() == [a.session_id, b.session_id]


async def test_timestamps_come_from_the_injected_clock() -> None:
    clock = FixedClock()
    s = MemoryMetadataServer(clock=clock).session()
    st = await s.put("/t", b"")
    clock.now_ms = 5_000
    st2 = await s.put("/t", b"x")
    assert (st.creation_time_ms, st2.creation_time_ms, st2.modification_time_ms) == (1_000, 1_000, 5_000)


async def test_expire_session_drops_ephemerals_and_renews_session() -> None:
    server = MemoryMetadataServer(name="m")
    a, b = server.session(), server.session()
    events: list[SessionEvent] = []
    notes: list[Notification] = []
    a.add_session_listener(events.append)
    b.add_listener(notes.append)
    await a.put("/e", b"", ephemeral=True)
    old = a.session_id
    server.expire_session(old)
    assert await b.exists("/e") is None
    await asyncio.sleep(0)
    assert events == [SessionEvent.SESSION_LOST, SessionEvent.CONNECTED]
    assert Notification(NotificationType.DELETED, "/e") in notes
    assert a.session_id != old and old not in server.session_ids()
    st = await a.put("/e", b"", ephemeral=True)
    assert st.ephemeral_owner == a.session_id


async def test_suspend_and_resume() -> None:
    server = MemoryMetadataServer()
    a = server.session()
    events: list[SessionEvent] = []
    a.add_session_listener(events.append)
    server.suspend_session(a.session_id)
    with pytest.raises(ConnectionLoss):
        await a.get("/")
    server.resume_session(a.session_id)
    await a.put("/ok", b"")
    await asyncio.sleep(0)
    assert events == [SessionEvent.SUSPENDED, SessionEvent.RECONNECTED]


async def test_notifications_are_delivered_after_the_write_returns_in_order() -> None:
    server = MemoryMetadataServer()
    a = server.session()
    seen: list[Notification] = []
    a.add_listener(seen.append)
    await a.put("/p/q", b"")
    assert seen == []  # delivered on the next loop iteration, never inside put
    await asyncio.sleep(0)
    assert seen == [
        Notification(NotificationType.CREATED, "/p"),
        Notification(NotificationType.CHILDREN_CHANGED, "/"),
        Notification(NotificationType.CREATED, "/p/q"),
        Notification(NotificationType.CHILDREN_CHANGED, "/p"),
    ]


async def test_a_failing_listener_does_not_break_others() -> None:
    a = MemoryMetadataServer().session()
    seen: list[Notification] = []

    def boom(_n: Notification) -> None:
        raise RuntimeError("listener bug")

    a.add_listener(boom)
    a.add_listener(seen.append)
    await a.put("/z", b"")
    await asyncio.sleep(0)
    assert Notification(NotificationType.CREATED, "/z") in seen


async def _scenario() -> list[str]:
    server = MemoryMetadataServer(clock=FixedClock())
    sessions = [server.session() for _ in range(3)]
    out = []
    for i, s in enumerate(sessions):
        st = await s.put("/q/n-", str(i).encode(), sequential=True, ephemeral=i % 2 == 0)
        out.append(f"{st.path}:{st.ephemeral_owner}")
    server.expire_session(sessions[0].session_id)
    out += await sessions[1].children("/q")
    return out


async def test_deterministic_across_runs() -> None:
    assert await _scenario() == await _scenario()


def test_parse_urls() -> None:
    assert parse_metadata_url("memory:").target == "default"
    assert parse_metadata_url("memory:local").target == "local"
    assert parse_metadata_url("rocksdb:/var/lib/m").target == "/var/lib/m"
    u = parse_metadata_url("zk:h1:2181,h2:2182/pulsar/a")
    assert (u.scheme, u.zk_hosts, u.zk_chroot) == ("zk", "h1:2181,h2:2182", "/pulsar/a")
    assert parse_metadata_url("zk://h:1").zk_chroot == ""
    for bad in ("nothing", "ftp:x", "zk:host", "rocksdb:"):
        with pytest.raises(ValueError):
            parse_metadata_url(bad)


async def test_factory_memory_names_share_a_server_only_with_a_registry() -> None:
    clock = RealClock()
    servers: dict[str, MemoryMetadataServer] = {}
    a = await create_metadata_store("memory:one", clock=clock, memory_servers=servers)
    b = await create_metadata_store("memory:one", clock=clock, memory_servers=servers)
    c = await create_metadata_store("memory:one", clock=clock)
    await a.put("/shared", b"1")
    assert await b.get("/shared") is not None
    assert await c.get("/shared") is None
