"""Resource-group limiters (broker.service.resource_groups): budgets, sharing, refresh from the store."""

from __future__ import annotations

import asyncio
import json

import pytest

from magnetar.broker.ownership.ownership import OwnerData
from magnetar.broker.resources.resource_groups import NO_QUOTA, GroupQuota
from magnetar.broker.service.resource_groups import ResourceGroupLimiter, ResourceGroupService
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import RealClock


class FakeCnx:
    def __init__(self) -> None:
        self.paused_s: list[float] = []

    def pause_reading(self, delay_s: float) -> None:
        self.paused_s.append(delay_s)


def test_quota_from_document_and_shares() -> None:
    q = GroupQuota.from_doc({"publishRateInMsgs": 200, "publishRateInBytes": -1, "dispatchRateInMsgs": 0})
    assert q.values() == (200, -1, -1, -1)
    assert GroupQuota.from_doc(None) is NO_QUOTA
    assert q.shared_by(1) is q
    assert q.shared_by(3).values() == (67, -1, -1, -1)  # ceil: the sum is never under the quota
    assert GroupQuota(1, 5, 7, 9).shared_by(4).values() == (1, 2, 2, 3)


def test_publish_budget_is_shared_by_every_connection_of_the_group() -> None:
    lim = ResourceGroupLimiter("g")
    lim.configure(GroupQuota(publish_msgs=10), brokers=1)
    a, b = FakeCnx(), FakeCnx()
    for _ in range(10):  # one second's burst
        lim.throttle_publish(a, 1, 100, now_s=100.0)
    assert not a.paused_s
    lim.throttle_publish(b, 1, 100, now_s=100.0)  # the other connection pays the debt too
    assert b.paused_s == [pytest.approx(0.1)]
    lim.throttle_publish(a, 1, 100, now_s=100.0)
    assert a.paused_s == [pytest.approx(0.2)]
    lim.throttle_publish(b, 1, 100, now_s=100.35)  # 0.35 s later the debt is paid
    assert len(b.paused_s) == 1
    assert lim.published_msgs == 13 and lim.publish_throttled == 2


def test_connections_share_the_rate_fairly_over_time() -> None:
    """Two connections sending as fast as they are let: together the rate (plus the first
    second's burst), each about half, however late the loop wakes them."""
    lim = ResourceGroupLimiter("g")
    lim.configure(GroupQuota(publish_msgs=200), brokers=1)
    cnx = [FakeCnx(), FakeCnx()]
    ready_s = [0.0, 0.0]
    sent = [0, 0]
    while True:
        i = 0 if ready_s[0] <= ready_s[1] else 1
        now = ready_s[i]
        if now >= 10.0:
            break
        before = len(cnx[i].paused_s)
        lim.throttle_publish(cnx[i], 1, 10, now_s=now)
        sent[i] += 1
        # a paused connection wakes 2 ms late (a busy loop); otherwise its next frame is 0.1 ms away
        ready_s[i] = now + (cnx[i].paused_s[-1] + 0.002 if len(cnx[i].paused_s) > before else 0.0001)
    assert 200 * 10 <= sum(sent) <= 200 * 11 + 2, sent
    assert abs(sent[0] - sent[1]) <= 0.1 * sum(sent), sent


def test_byte_budget_and_live_update() -> None:
    lim = ResourceGroupLimiter("g")
    lim.configure(GroupQuota(publish_bytes=1000), brokers=1)
    cnx = FakeCnx()
    lim.throttle_publish(cnx, 1, 1000, now_s=5.0)
    assert not cnx.paused_s
    lim.throttle_publish(cnx, 1, 500, now_s=5.0)
    assert cnx.paused_s == [pytest.approx(0.5)]
    lim.configure(GroupQuota(publish_bytes=4000), brokers=2)  # the same object, new share
    assert lim.publish_bytes == 2000 and lim.publish_msgs == -1
    cnx.paused_s.clear()
    lim.throttle_publish(cnx, 1, 1000, now_s=6.0)  # refilled at the new rate: 2000/s
    assert not cnx.paused_s
    lim.configure(NO_QUOTA, brokers=1)
    lim.throttle_publish(cnx, 1, 10**9, now_s=6.1)  # no limit any more: counted, never paused
    assert not cnx.paused_s and lim.dispatch_rate.unlimited


def _owner(port: int) -> bytes:
    return OwnerData(f"pulsar://h:{port}", None, f"http://h:{port + 1}").to_json()


async def _service_with(store) -> ResourceGroupService:  # noqa: ANN001
    await store.put(
        "/admin/resourcegroups/g", json.dumps({"publishRateInMsgs": 300, "dispatchRateInMsgs": 90}).encode()
    )
    await store.put("/admin/resourcegroups/idle", json.dumps({"publishRateInMsgs": 5}).encode())
    for ns in ("t/a", "t/b", "t/outside"):
        doc = {"resource_group_name": "g"} if ns != "t/outside" else {}
        await store.put(f"/admin/policies/{ns}", json.dumps(doc).encode())
    return ResourceGroupService(store, RealClock())


def test_share_is_quota_over_the_brokers_owning_the_groups_bundles() -> None:
    async def main() -> None:
        store = MemoryMetadataServer().session()
        svc = await _service_with(store)
        await svc.refresh()
        g = svc.limiter("g")
        assert g.namespaces == ("t/a", "t/b") and g.brokers == 1 and g.publish_msgs == 300
        # two brokers own bundles of t/a and t/b; a third owns only the outside namespace
        await store.put("/namespace/t/a/0x00000000_0x80000000", _owner(6650))
        await store.put("/namespace/t/a/0x80000000_0xffffffff", _owner(6660))
        await store.put("/namespace/t/b/0x00000000_0xffffffff", _owner(6650))
        await store.put("/namespace/t/outside/0x00000000_0xffffffff", _owner(6670))
        await svc.refresh()
        assert g.brokers == 2 and g.publish_msgs == 150 and g.dispatch_rate.messages == 45
        assert svc.limiter("idle").publish_msgs == 5  # no namespace: one broker's worth
        stats = svc.statistics()
        assert stats["g"]["brokers"] == 2 and stats["g"]["publishRateInMsgs"] == 150
        await store.aclose()

    asyncio.run(main())


def test_changes_in_the_store_reach_the_limiter_without_a_reload() -> None:
    async def main() -> None:
        store = MemoryMetadataServer().session()
        svc = await _service_with(store)
        svc.interval_s = 60.0  # only notifications can make it in time
        runner = asyncio.ensure_future(svc.run())
        try:
            g = svc.limiter("g")

            async def until(cond) -> None:  # noqa: ANN001
                for _ in range(400):
                    if cond():
                        return
                    await asyncio.sleep(0.025)
                raise AssertionError("the limiter did not follow the store")

            await until(lambda: g.publish_msgs == 300)
            await store.put("/admin/resourcegroups/g", json.dumps({"publishRateInMsgs": 400}).encode())
            await until(lambda: g.publish_msgs == 400)
            await store.put("/admin/policies/t/b", json.dumps({}).encode())  # detached
            await until(lambda: g.namespaces == ("t/a",))
            unknown = svc.limiter("later")  # named before this broker read it
            assert unknown.publish_msgs == -1
            await store.put("/admin/resourcegroups/later", json.dumps({"publishRateInBytes": 10}).encode())
            await until(lambda: unknown.publish_bytes == 10)
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await store.aclose()

    asyncio.run(main())
