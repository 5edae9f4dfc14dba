"""Coordination recipes on the memory backend: CAS loop, lock, leader election."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata.coordination import (
    DELETE,
    NO_CHANGE,
    CasConflict,
    DistributedLock,
    ElectionState,
    LeaderElection,
    LeaderEvent,
    LockBusy,
    LockLost,
    LockState,
    update_with_cas,
)
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock, Rng
from magnetar.testing.metadata_conformance import wait_until


async def test_cas_loop_100_concurrent_increments_from_four_sessions() -> None:
    server = MemoryMetadataServer()
    sessions = [server.session() for _ in range(4)]
    clock, rng = RealClock(), Rng(7)  # jittered backoff between conflicting attempts

    async def inc(v: bytes | None) -> bytes:
        await asyncio.sleep(0)  # let others interleave between our read and our write
        return str(int(v or b"0") + 1).encode()

    async def one(i: int) -> int:
        await asyncio.sleep(0)
        r = await update_with_cas(sessions[i % 4], "/counter", inc, clock=clock, rng=rng)
        return r.attempts

    attempts = await asyncio.gather(*(one(i) for i in range(100)))
    got = await sessions[0].get("/counter")
    assert got.value == b"100" and got.stat.version == 99  # created at 0, 99 updates
    assert max(attempts) > 1, "the test should have produced conflicts"


async def test_cas_no_change_and_delete() -> None:
    s = MemoryMetadataServer().session()
    r = await update_with_cas(s, "/x", lambda v: NO_CHANGE)
    assert not r.changed and r.value is None and await s.exists("/x") is None
    await s.put("/x", b"1")
    r = await update_with_cas(s, "/x", lambda v: NO_CHANGE)
    assert not r.changed and r.stat.version == 0
    r = await update_with_cas(s, "/x", lambda v: DELETE)
    assert r.changed and await s.exists("/x") is None

    async def async_modify(v: bytes | None) -> bytes:
        return b"async"

    r = await update_with_cas(s, "/x", async_modify)
    assert r.value == b"async" and r.stat.version == 0


async def test_cas_gives_up_after_max_attempts() -> None:
    server = MemoryMetadataServer()
    s, meddler = server.session(), server.session()
    await s.put("/hot", b"0")

    async def modify(v: bytes | None) -> bytes:
        await meddler.put("/hot", b"meddled")  # always wins the race
        return b"mine"

    with pytest.raises(CasConflict) as err:
        await update_with_cas(s, "/hot", modify, max_attempts=3)
    assert err.value.attempts == 3 and "3 conflicting" in str(err.value)


async def test_lock_exclusive_then_lost_on_session_expiry_and_taken_by_new_session() -> None:
    server = MemoryMetadataServer()
    a, b = server.session(), server.session()
    lock_a = DistributedLock(a, "/locks/bundle", b"broker-a")
    lost: list[LockLost] = []
    lock_a.add_lost_listener(lost.append)
    await lock_a.acquire()
    assert lock_a.held and lock_a.stat.ephemeral_owner == a.session_id

    lock_b = DistributedLock(b, "/locks/bundle", b"broker-b")
    with pytest.raises(LockBusy, match=a.session_id):
        await lock_b.acquire(timeout_ms=0)

    waiter = asyncio.create_task(lock_b.acquire(timeout_ms=5_000))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    server.expire_session(a.session_id)
    await asyncio.wait_for(waiter, 5)
    assert lock_b.held and (await b.get("/locks/bundle")).value == b"broker-b"
    await wait_until(lambda: lost != [], "LockLost")
    assert lost[0].path == "/locks/bundle" and "session" in lost[0].reason
    assert lock_a.state is LockState.LOST
    await lock_a.release()  # no-op on a lost lock: must not delete b's node
    assert (await b.get("/locks/bundle")).stat.ephemeral_owner == b.session_id


async def test_lock_release_wakes_a_waiter_and_deleted_node_is_lost() -> None:
    server = MemoryMetadataServer()
    a, b, admin = server.session(), server.session(), server.session()
    lock_a = DistributedLock(a, "/l")
    await lock_a.acquire()
    lock_b = DistributedLock(b, "/l")
    waiter = asyncio.create_task(lock_b.acquire(timeout_ms=5_000))
    await asyncio.sleep(0.01)
    await lock_a.release()
    assert lock_a.state is LockState.RELEASED
    await asyncio.wait_for(waiter, 5)
    assert lock_b.held
    await lock_b.update_value(b"new")
    assert (await admin.get("/l")).value == b"new"
    await admin.delete("/l")
    got = await lock_b.wait_lost(5)
    assert "deleted" in got.reason


async def test_election_hands_over_on_close_and_on_session_expiry() -> None:
    server = MemoryMetadataServer()
    sessions = [server.session() for _ in range(3)]
    events: dict[int, list[LeaderEvent]] = {i: [] for i in range(3)}
    elections = [
        LeaderElection(
            s, "/loadbalance/leader", f"broker-{i}".encode(), events[i].append, retry_interval_ms=50
        )
        for i, s in enumerate(sessions)
    ]
    states = [await e.start() for e in elections]
    assert states == [ElectionState.LEADING, ElectionState.FOLLOWING, ElectionState.FOLLOWING]
    assert events[0] == [LeaderEvent.BECAME_LEADER]
    assert await elections[1].leader_value() == b"broker-0"

    def leaders() -> list[int]:
        return [i for i, e in enumerate(elections) if e.is_leader]

    # Expiry: the leader is told at once; someone (maybe the old leader on its new session) leads.
    server.expire_session(sessions[0].session_id)
    await wait_until(lambda: LeaderEvent.LOST_LEADERSHIP in events[0], "LOST_LEADERSHIP")
    await wait_until(lambda: len(leaders()) == 1, "one leader")
    await asyncio.sleep(0.05)
    assert len(leaders()) == 1
    leader = leaders()[0]
    got = await sessions[1].get("/loadbalance/leader")
    assert got.value == f"broker-{leader}".encode()
    assert got.stat.ephemeral_owner == sessions[leader].session_id

    # Process death of the leader: its session closes and a follower takes over.
    await sessions[leader].aclose()
    await wait_until(lambda: any(e.is_leader for i, e in enumerate(elections) if i != leader), "hand-over")
    new = next(i for i, e in enumerate(elections) if i != leader and e.is_leader)
    assert LeaderEvent.BECAME_LEADER in events[new]
    assert await elections[3 - leader - new].leader_value() == f"broker-{new}".encode()

    await elections[new].close()
    assert events[new][-1] is LeaderEvent.LOST_LEADERSHIP
    last = 3 - leader - new
    await wait_until(lambda: elections[last].is_leader, "hand-over after close")
    for e in elections:
        await e.close()
    assert await sessions[new].exists("/loadbalance/leader") is None


async def test_lock_takes_over_its_own_node_after_a_lost_answer() -> None:
    from magnetar.metadata.api import ConnectionLoss
    from magnetar.testing.faults import FaultPlan
    from magnetar.testing.metadata_faults import FaultInjectingMetadataStore

    plan = FaultPlan()
    plan.drop("put", "/l", times=1)
    server = MemoryMetadataServer()
    store = FaultInjectingMetadataStore(server.session(), plan)
    with pytest.raises(ConnectionLoss):
        await DistributedLock(store, "/l", b"me").acquire()
    lock = DistributedLock(store, "/l", b"me")
    await lock.acquire()
    assert lock.held
    other = DistributedLock(server.session(), "/l", b"me")
    assert not await other.try_acquire(), "another session never takes over"
