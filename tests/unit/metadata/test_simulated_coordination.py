"""Locks and leader election in simulation: memory backend, virtual time, seeded faults and expiries.

Four "brokers" (sessions over one MemoryMetadataServer, each behind a
fault-injecting wrapper that fails or loses 5% of operations) fight for a lock
and a leadership while a driver expires random sessions.  Invariants checked
throughout: never two holders of the lock, never two leaders; and the same
seed replays the same history.
"""

from __future__ import annotations

import asyncio

from magnetar.metadata.api import MetadataError
from magnetar.metadata.coordination import DistributedLock, LeaderElection, LockBusy
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Rng
from magnetar.testing.clock import VirtualClock, run_virtual
from magnetar.testing.faults import FaultPlan
from magnetar.testing.metadata_faults import FaultInjectingMetadataStore

WORKERS = 4
ROUNDS = 40


async def scenario(seed: int) -> list[str]:
    clock = VirtualClock()
    rng = Rng(seed)
    server = MemoryMetadataServer(clock=clock, name=f"sim{seed}")
    plan = FaultPlan(rng.fork("faults"))
    plan.fail("*", "*", probability=0.03)
    plan.drop("put", "*", probability=0.02)
    stores = [FaultInjectingMetadataStore(server.session(), plan, clock=clock) for _ in range(WORKERS)]
    history: list[str] = []
    holders: set[int] = set()
    elections = [
        LeaderElection(s, "/leader", str(i).encode(), clock=clock, retry_interval_ms=100)
        for i, s in enumerate(stores)
    ]

    def check_leaders() -> None:
        leaders = [i for i, e in enumerate(elections) if e.is_leader]
        assert len(leaders) <= 1, f"two leaders: {leaders}"

    async def worker(i: int) -> None:
        wrng = rng.fork(f"worker{i}")
        for _ in range(ROUNDS):
            lock = DistributedLock(stores[i], "/lock", str(i).encode())
            lock.add_lost_listener(lambda _e, i=i: holders.discard(i))
            try:
                await lock.acquire(timeout_ms=wrng.randint(0, 500))
            except (LockBusy, MetadataError):
                await clock.sleep(wrng.uniform(0.01, 0.2))
                continue
            assert not holders, f"worker {i} acquired while {holders} hold the lock"
            holders.add(i)
            history.append(f"{clock.monotonic():.3f} {i} acquired")
            await clock.sleep(wrng.uniform(0.01, 0.3))
            check_leaders()
            holders.discard(i)
            await lock.release()

    async def expirer() -> None:
        erng = rng.fork("expirer")
        for _ in range(15):
            await clock.sleep(erng.uniform(0.1, 1.0))
            victim = erng.randint(0, WORKERS - 1)
            history.append(f"{clock.monotonic():.3f} expire {victim}")
            server.expire_session(stores[victim].session_id)
            check_leaders()

    for e in elections:
        await e.start()  # retries failed rounds by itself
    await asyncio.gather(expirer(), *(worker(i) for i in range(WORKERS)))
    plan.pause()  # liveness phase: no more faults; a leader must emerge
    for _ in range(100):
        await clock.sleep(0.1)
        if sum(e.is_leader for e in elections) == 1:
            break
    check_leaders()
    assert sum(e.is_leader for e in elections) == 1, "no leader after faults stopped"
    history.append(f"leader {[e.is_leader for e in elections].index(True)}")
    for e in elections:
        await e.close()
    return history


def test_lock_and_election_invariants_under_faults_and_expiry() -> None:
    for seed in (1, 2, 3):
        history = run_virtual(scenario(seed))
        assert sum("acquired" in h for h in history) > 10, history


def test_same_seed_same_history() -> None:
    assert run_virtual(scenario(7)) == run_virtual(scenario(7))
