"""Idle topics cost nothing: the replication check and the policy enforcer act on changes.

In-process standalone (its RocksDB metadata store notifies every change):

* the replication check reads no policy document while nothing changes, however many
  topics are loaded, and still acts on a change at once -- a namespace's
  ``replication_clusters`` gaining a cluster starts the replicator of every loaded topic
  of that namespace, losing it closes them and deletes their cursors;
* the policy enforcer hears of a new topic through the registry's ``on_loaded`` hook
  (its policies are resolved within a tick) and an idle tick looks at no topic.
"""

from __future__ import annotations

import asyncio
import time

from magnetar.broker.service.names import parse_topic
from magnetar.testing.standalone import running_standalone

NS = "public/default"
REMOTE = "perfi-remote"


async def poll(cond, timeout_s: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_replication_check_reads_nothing_while_idle_and_acts_on_a_change(tmp_path) -> None:
    props = {"magnetarReplicationPolicyCheckIntervalMs": "100", "brokerDeleteInactiveTopicsEnabled": "false"}
    async with running_standalone(tmp_path, props) as sa:
        svc = sa.broker_service
        repl = svc.replication
        names = [f"persistent://{NS}/perfi-idle-{i}" for i in range(5)]
        for name in names:
            await svc.create_non_partitioned_topic(name)
        topics = [svc.topics.get_loaded(name) for name in names]
        assert all(t is not None for t in topics)

        calls: list[str] = []
        original = repl.configured_clusters_for

        async def counting(ref, **kw):
            calls.append(ref.full_name)
            return await original(ref, **kw)

        repl.configured_clusters_for = counting
        await poll(lambda: not repl._check_all, what="the first full check")  # noqa: SLF001
        await asyncio.sleep(1.0)  # it may still be walking the topics
        calls.clear()
        await asyncio.sleep(1.5)  # 15 intervals: the old check read 2 documents per topic each
        assert calls == [], "an idle broker re-read the replication policy of idle topics"

        remote = {"serviceUrl": "http://127.0.0.1:1", "brokerServiceUrl": "pulsar://127.0.0.1:1"}
        await svc.resources.clusters.create(REMOTE, remote)
        await svc.resources.namespaces.update(
            NS, lambda doc: {**doc, "replication_clusters": [svc.config.cluster_name, REMOTE]}
        )
        await poll(lambda: all(REMOTE in t.replicators for t in topics), what="replicators started")
        assert set(calls) == set(names)  # only the namespace's topics were looked at
        cursor = f"{repl.prefix}.{REMOTE}"
        assert all(cursor in t.ml.cursors for t in topics)

        await svc.resources.namespaces.update(
            NS, lambda doc: {**doc, "replication_clusters": [svc.config.cluster_name]}
        )
        await poll(
            lambda: all(not t.replicators and cursor not in t.ml.cursors for t in topics),
            what="replicators stopped and their cursors deleted",
        )


async def test_enforcer_hears_of_new_topics_and_idle_ticks_touch_no_topic(tmp_path) -> None:
    async with running_standalone(tmp_path, {"brokerDeleteInactiveTopicsEnabled": "false"}) as sa:
        svc = sa.broker_service
        scans = 0
        original = svc.topics.loaded

        def counting_loaded():
            nonlocal scans
            scans += 1
            return original()

        svc.topics.loaded = counting_loaded
        name = f"persistent://{NS}/perfi-enforced"
        await svc.create_non_partitioned_topic(name)
        topic = svc.topics.get_loaded(name)
        await poll(lambda: topic.policies.resolved, what="policies applied to the new topic")
        nonpersistent = await svc.topics.get_topic(parse_topic(f"non-persistent://{NS}/perfi-np"), create=True)
        await poll(lambda: nonpersistent.policies.resolved, what="policies applied to the non-persistent topic")
        await asyncio.sleep(0.5)
        scans = 0
        await asyncio.sleep(1.0)  # ten enforcer ticks (0.1 s), the replication check's interval
        # the enforcer's full pass (every 5 s) and the 60 s checks may each scan once
        assert scans <= 2, f"{scans} registry scans in 1 s of idle"
