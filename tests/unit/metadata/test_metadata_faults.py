"""The fault-injecting metadata store: scripted and seeded-random failures, delays, lost answers."""

from __future__ import annotations

import pytest

from magnetar.metadata.api import ConnectionLoss, NotFound
from magnetar.metadata.coordination import update_with_cas
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Rng
from magnetar.testing.faults import FaultPlan
from magnetar.testing.metadata_conformance import CHECKS, MetadataStoreFactory, run_check
from magnetar.testing.metadata_faults import FaultInjectingMetadataStore


class RecordingClock:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return 0.0

    def time_ms(self) -> int:
        return 0

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def call_later(self, seconds, callback):  # pragma: no cover - unused
        raise NotImplementedError


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_wrapper_with_empty_plan_passes_conformance(check) -> None:
    server = MemoryMetadataServer()

    async def new_store():
        return FaultInjectingMetadataStore(server.session())

    async def expire(store):
        server.expire_session(store.session_id)

    await run_check(MetadataStoreFactory(new_store, expire, name="faulty-memory"), check)


async def test_scripted_fail_matches_operation_and_path_glob() -> None:
    plan = FaultPlan()
    plan.fail("put", "/ledgers/*", after=1, times=2)
    s = FaultInjectingMetadataStore(MemoryMetadataServer().session(), plan)
    await s.put("/ledgers/L1", b"")  # `after=1` lets the first through
    for _ in range(2):
        with pytest.raises(ConnectionLoss, match="injected"):
            await s.put("/ledgers/L2", b"")
    await s.put("/ledgers/L2", b"")  # rule retired
    await s.put("/other", b"")
    assert await s.children("/ledgers") == ["L1", "L2"]
    plan.fail("get", "/other", error=NotFound("scripted"))
    with pytest.raises(NotFound, match="scripted"):
        await s.get("/other")
    assert s.stats["put"] == 5


async def test_delay_uses_the_injected_clock() -> None:
    plan = FaultPlan()
    plan.delay("get", "*", delay_s=2.5)
    clock = RecordingClock()
    s = FaultInjectingMetadataStore(MemoryMetadataServer().session(), plan, clock=clock)
    assert await s.get("/x") is None
    assert clock.slept == [2.5]


async def test_dropped_write_is_applied_but_answer_lost_and_cas_loop_copes() -> None:
    plan = FaultPlan()
    plan.drop("put", "/counter", times=1)
    inner = MemoryMetadataServer().session()
    s = FaultInjectingMetadataStore(inner, plan)
    with pytest.raises(ConnectionLoss, match="answer lost"):
        await s.put("/counter", b"1")
    assert (await inner.get("/counter")).value == b"1"


async def test_seeded_random_faults_replay_identically() -> None:
    async def run(seed: int) -> list[bool]:
        plan = FaultPlan(Rng(seed))
        plan.fail("*", "*", probability=0.3)
        s = FaultInjectingMetadataStore(MemoryMetadataServer().session(), plan)
        out = []
        for i in range(50):
            try:
                await s.put(f"/k{i}", b"")
                out.append(True)
            except ConnectionLoss:
                out.append(False)
        return out

    first = await run(42)
    assert first == await run(42)
    assert 5 < first.count(False) < 30
    assert first != await run(43)


async def test_cas_loop_over_flaky_store_retries_only_conflicts() -> None:
    plan = FaultPlan()
    plan.fail("put", "/n", times=1)
    s = FaultInjectingMetadataStore(MemoryMetadataServer().session(), plan)
    with pytest.raises(ConnectionLoss):  # not a conflict: surfaced to the caller
        await update_with_cas(s, "/n", lambda v: b"x")
    r = await update_with_cas(s, "/n", lambda v: b"x")
    assert r.changed and r.attempts == 1
