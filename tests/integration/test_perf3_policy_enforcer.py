"""The policy enforcer is event-driven: idle topics cost no metadata reads per pass, and a
policy written straight into the metadata store (as another broker would) still reaches the
loaded topics, within a tick rather than an interval.

Runs a real standalone in this process (so the test can count the store's reads)."""

from __future__ import annotations

import asyncio
import time
import traceback
from pathlib import Path

from magnetar.app.config import StandaloneConfig
from magnetar.app.standalone import Standalone
from magnetar.broker.admin.policies import BY_NAME
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.resources.namespaces import ROOT as NAMESPACE_ROOT
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.policies import TOPIC_POLICIES_ROOT

TOPICS = 30
INTERVAL_MS = 200


def _from_enforcer() -> bool:
    """The read is the enforcer's (its pass, or its document cache loading), not another
    component's (geo-replication checks read the same documents)."""
    files = [f.filename for f in traceback.extract_stack()]
    return any(f.endswith(("topic_policies.py", "policy_documents.py", "metadata/cache.py")) for f in files)


async def _eventually(check, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_idle_topics_cost_no_reads_and_store_writes_reach_topics(tmp_path: Path):
    cfg = StandaloneConfig(
        data_dir=tmp_path,
        broker_port=0,
        web_port=0,
        bind_address="127.0.0.1",
        advertised_address="127.0.0.1",
        properties={
            "brokerDeleteInactiveTopicsEnabled": "false",
            "magnetarPolicyCheckIntervalMs": str(INTERVAL_MS),
        },
    )
    standalone = Standalone(cfg)
    await standalone.start()
    try:
        svc = standalone.broker_service
        topics = [
            await svc.topics.get_topic(
                parse_topic(f"persistent://public/default/pe-{i}"), create=True, explicit=True
            )
            for i in range(TOPICS)
        ]
        await _eventually(lambda: all(t.policies.resolved for t in topics))

        store = svc.metadata_store
        reads: list[str] = []
        real_get = store.get

        async def counting_get(path: str):
            if path.startswith((TOPIC_POLICIES_ROOT, NAMESPACE_ROOT)) and _from_enforcer():
                reads.append(path)
            return await real_get(path)

        store.get = counting_get
        try:
            await asyncio.sleep(INTERVAL_MS / 1000 * 2)  # let any pass started before settle
            reads.clear()
            await asyncio.sleep(INTERVAL_MS / 1000 * 6)  # several full passes
            assert reads == [], f"idle passes re-read policy documents: {reads[:5]}"

            # Another broker's write: straight into the store, no local listener runs.
            spec = BY_NAME["maxProducers"]
            js = JsonStore(store)
            await js.update(f"{NAMESPACE_ROOT}/public/default", lambda d: {**d, spec.ns_field: 3})
            await _eventually(lambda: all(t.policies.max_producers == 3 for t in topics))
        finally:
            store.get = real_get
    finally:
        await standalone.aclose()
