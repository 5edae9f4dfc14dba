"""CompactionService: one run per topic (409 on a second), Pulsar's status JSON, auto-compaction."""

from __future__ import annotations

import asyncio

import pytest
from compaction_helpers import Workload, single

from magnetar.broker import errors as broker_errors
from magnetar.broker.compaction import (
    CompactionAlreadyRunning,
    CompactionService,
    Compactor,
    compaction_backlog_bytes,
    read_horizon,
)
from magnetar.managed_ledger.api import ManagedLedgerConfig
from magnetar.runtime import TaskSupervisor

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=200, min_ledger_rollover_time_ms=0)
TOPIC = "persistent://public/default/svc"


@pytest.fixture
async def setup(harness):
    f = await harness.new_factory(CONFIG)
    ml = await f.open("public/default/persistent/svc")
    opened = []

    async def open_ledger(topic: str):
        opened.append(topic)
        if topic != TOPIC:
            raise broker_errors.TopicNotFoundError(f"Topic {topic} not found")
        return ml

    sup = TaskSupervisor("test")
    svc = CompactionService(Compactor(harness.bk, harness.clock), open_ledger, sup)
    yield svc, ml, harness
    await svc.aclose()
    await sup.aclose()


async def test_trigger_twice_at_once_is_a_typed_409(setup):
    svc, ml, h = setup
    await Workload(seed=1).append(ml, 2_000)
    assert svc.status(TOPIC) == {"status": "NOT_RUN", "lastError": ""}
    h.bk.faults.hold_adds()  # keep the first run in phase two
    task = svc.trigger(TOPIC)
    assert svc.status(TOPIC) == {"status": "RUNNING", "lastError": ""}
    with pytest.raises(CompactionAlreadyRunning) as info:
        svc.trigger(TOPIC)
    assert info.value.http_status == 409 and info.value.message == "Compaction already in progress"
    assert info.value.server_error == broker_errors.Code.NotAllowedError
    assert read_horizon(ml) is None, "the refused trigger changed nothing"
    h.bk.faults.release_adds()
    result = await task
    assert svc.status(TOPIC) == {"status": "SUCCESS", "lastError": ""}
    assert read_horizon(ml) == result.horizon
    assert svc.last_result(TOPIC) is result
    # Once finished, a new trigger is accepted.
    await ml.add_entry(single("k", b"v", 1))
    again = await svc.compact(TOPIC)
    assert again.horizon.position == ml.last_confirmed_entry


async def test_failed_run_reports_error_with_reason(setup):
    svc, _ml, _h = setup
    missing = "persistent://public/default/missing"
    with pytest.raises(broker_errors.TopicNotFoundError):
        await svc.compact(missing)
    st = svc.status(missing)
    assert st["status"] == "ERROR" and "not found" in st["lastError"]


async def test_failed_compaction_then_success(setup):
    svc, ml, h = setup
    await Workload(seed=2).append(ml, 1_000)
    h.bk.faults.fail_create()
    with pytest.raises(Exception):  # noqa: B017 - any failure is reported through status()
        await svc.compact(TOPIC)
    assert svc.status(TOPIC)["status"] == "ERROR" and svc.status(TOPIC)["lastError"]
    await svc.compact(TOPIC)
    assert svc.status(TOPIC) == {"status": "SUCCESS", "lastError": ""}


async def test_auto_compaction_by_threshold(setup):
    svc, ml, _h = setup
    await Workload(seed=3).append(ml, 1_000)
    backlog = compaction_backlog_bytes(ml)
    assert backlog == ml.total_size > 0
    assert not svc.maybe_auto_compact(TOPIC, backlog, 0), "0 disables automatic compaction"
    assert not svc.maybe_auto_compact(TOPIC, backlog, backlog + 1)
    assert svc.maybe_auto_compact(TOPIC, backlog, backlog - 1)
    assert not svc.maybe_auto_compact(TOPIC, backlog, backlog - 1), "already running: ignored"
    for _ in range(500):  # bounded wait for the background run
        if svc.status(TOPIC)["status"] != "RUNNING":
            break
        await asyncio.sleep(0.01)
    assert svc.status(TOPIC)["status"] == "SUCCESS"
    assert compaction_backlog_bytes(ml) == 0
