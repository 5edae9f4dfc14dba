"""ZooKeeper session loss, for real: locks are lost, ephemerals vanish, leadership moves.

Two ways a session dies: the server expires it (forced here with a second
client on the same session id and password, which closes it), and the
server is unreachable for longer than the session timeout (we stop the
ZooKeeper process, wait, and start it again).
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata.api import SessionEvent
from magnetar.metadata.coordination import (
    DistributedLock,
    ElectionState,
    LeaderElection,
    LeaderEvent,
    LockLost,
    LockState,
)
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock
from magnetar.testing.metadata_conformance import wait_until, wait_until_async
from magnetar.testing.zookeeper import expire_session, zookeeper_server_fixture  # noqa: F401 - fixture

pytestmark = pytest.mark.zookeeper
SESSION_TIMEOUT_MS = 2_000


@pytest.fixture
async def zk_stores(zookeeper_server):
    opened = []

    async def open_store(chroot: str = "/session-loss"):
        s = await create_metadata_store(
            f"{zookeeper_server.url}{chroot}",
            clock=RealClock(),
            session_timeout_ms=SESSION_TIMEOUT_MS,
            operation_timeout_ms=5_000,
        )
        opened.append(s)
        return s

    yield open_store
    for s in opened:
        await s.aclose()


async def _gone(store, path: str) -> bool:
    return await store.exists(path) is None


async def test_expired_session_loses_lock_and_leadership_and_others_take_over(zk_stores) -> None:
    a, b = await zk_stores(), await zk_stores()
    a_events: list[SessionEvent] = []
    a.add_session_listener(a_events.append)

    lock_a = DistributedLock(a, "/locks/bundle-0x00000000", b"broker-a")
    lost: list[LockLost] = []
    lock_a.add_lost_listener(lost.append)
    await lock_a.acquire()
    await a.put("/loadbalance/brokers/broker-a", b"{}", ephemeral=True)

    a_lead: list[LeaderEvent] = []
    b_lead: list[LeaderEvent] = []
    elect_a = LeaderElection(a, "/loadbalance/leader", b"broker-a", a_lead.append, retry_interval_ms=100)
    elect_b = LeaderElection(b, "/loadbalance/leader", b"broker-b", b_lead.append, retry_interval_ms=100)
    assert await elect_a.start() is ElectionState.LEADING
    assert await elect_b.start() is ElectionState.FOLLOWING

    lock_b = DistributedLock(b, "/locks/bundle-0x00000000", b"broker-b")
    waiter = asyncio.create_task(lock_b.acquire(timeout_ms=20_000))
    assert await b.exists("/loadbalance/brokers/broker-a") is not None
    old_session = a.session_id

    await expire_session(a)

    # The other client: A's ephemerals vanish, the lock and the leadership move to B.
    await wait_until_async(lambda: _gone(b, "/loadbalance/brokers/broker-a"), "A's ephemeral to vanish")
    await asyncio.wait_for(waiter, 20)
    assert lock_b.held
    got = await b.get("/locks/bundle-0x00000000")
    assert got.value == b"broker-b" and got.stat.ephemeral_owner == b.session_id
    await wait_until(lambda: elect_b.is_leader, "B to become leader", timeout_s=20)
    assert b_lead == [LeaderEvent.FOLLOWING, LeaderEvent.BECAME_LEADER]

    # The owner: LockLost, LOST_LEADERSHIP, SESSION_LOST, then a fresh session.
    await wait_until(lambda: lost != [], "LockLost", timeout_s=20)
    assert lock_a.state is LockState.LOST and "session" in lost[0].reason
    await wait_until(lambda: LeaderEvent.LOST_LEADERSHIP in a_lead, "LOST_LEADERSHIP", timeout_s=20)
    await wait_until(lambda: SessionEvent.CONNECTED in a_events, "a new session", timeout_s=20)
    assert a_events.index(SessionEvent.SESSION_LOST) < a_events.index(SessionEvent.CONNECTED)
    assert a.session_id not in ("", old_session)
    await wait_until(lambda: elect_a.state is ElectionState.FOLLOWING, "A to follow", timeout_s=20)
    assert await elect_a.leader_value() == b"broker-b"

    await elect_a.close()
    await elect_b.close()
    await lock_b.release()


async def test_server_down_past_session_timeout(zookeeper_server, zk_stores) -> None:
    a, b = await zk_stores("/server-down"), await zk_stores("/server-down")
    a_events: list[SessionEvent] = []
    a.add_session_listener(a_events.append)
    b_events: list[SessionEvent] = []
    b.add_session_listener(b_events.append)
    lock_a = DistributedLock(a, "/locks/l", b"a")
    await lock_a.acquire()
    await a.put("/eph/a", b"", ephemeral=True)
    old_session = a.session_id

    zookeeper_server.stop()
    try:
        await wait_until(lambda: SessionEvent.SUSPENDED in a_events, "SUSPENDED", timeout_s=10)
        lost = await lock_a.wait_lost(timeout_s=SESSION_TIMEOUT_MS / 1000 + 10)
        assert "session" in lost.reason
        assert SessionEvent.SESSION_LOST in a_events
    finally:
        await asyncio.to_thread(zookeeper_server.start)

    # Back up: A ends up on a new session, its old ephemerals are gone for B, B can take the lock.
    await wait_until(lambda: a.session_id not in ("", old_session), "A on a new session", timeout_s=30)
    # B was cut off as long as A: it too lost its session and comes back on a new one.
    await wait_until(lambda: SessionEvent.CONNECTED in b_events, "B on a new session", timeout_s=30)
    await wait_until_async(lambda: _gone(b, "/eph/a"), "A's old ephemeral to vanish", timeout_s=30)
    lock_b = DistributedLock(b, "/locks/l", b"b")
    await lock_b.acquire(timeout_ms=30_000)
    assert (await a.get("/locks/l")).stat.ephemeral_owner == b.session_id
    await lock_b.release()


async def test_cache_is_invalidated_by_zookeeper_watches(zk_stores) -> None:
    from magnetar.metadata.cache import JsonSerde, MetadataCache

    a, b = await zk_stores("/cache"), await zk_stores("/cache")
    cache = MetadataCache(b, JsonSerde())
    path = "/admin/partitioned-topics/public/default/persistent/t"
    assert await cache.get(path) is None  # negative entry, watch armed
    await a.put(path, b'{"partitions":2}')
    await wait_until(lambda: cache.statistics()["entries"] == 0, "CREATED to invalidate")
    assert await cache.get(path) == {"partitions": 2}
    await a.put(path, b'{"partitions":5}')
    await wait_until(lambda: cache.statistics()["entries"] == 0, "MODIFIED to invalidate")
    assert await cache.get(path) == {"partitions": 5}
    hits = cache.statistics()["hits"]
    assert await cache.get(path) == {"partitions": 5}
    assert cache.statistics()["hits"] == hits + 1
    await cache.aclose()
