"""GET_TOPICS_OF_NAMESPACE / the topic listing in its three modes."""

from __future__ import annotations

from broker_harness import RawClient


async def test_listing_modes_separate_persistent_and_non_persistent_topics(broker) -> None:
    c = await RawClient.connect(broker.port)
    try:
        await c.create_producer("persistent://public/default/lm-p", 1)
        await c.subscribe("non-persistent://public/default/lm-np", "s", 0, 2)
        await broker.service.create_partitioned_topic("non-persistent://public/default/lm-npp", 2)
        svc = broker.service
        persistent = await svc.list_topics("public/default", "PERSISTENT")
        non_persistent = await svc.list_topics("public/default", "NON_PERSISTENT")
        everything = await svc.list_topics("public/default", "ALL")
    finally:
        await c.aclose()
    assert "persistent://public/default/lm-p" in persistent
    assert not [t for t in persistent if t.startswith("non-persistent://")]
    assert non_persistent == [
        "non-persistent://public/default/lm-np",
        "non-persistent://public/default/lm-npp-partition-0",
        "non-persistent://public/default/lm-npp-partition-1",
    ]
    assert set(persistent) | set(non_persistent) == set(everything)
