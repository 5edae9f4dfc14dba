"""A non-persistent topic's stats (it stores nothing): every storage figure is zero, and
building them does not reach for a managed ledger it does not have (the tiered-storage
figures once did: a 500 on /admin/v2/non-persistent/.../stats)."""

from __future__ import annotations

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.nonpersistent_topic import NonPersistentTopic
from magnetar.broker.service.stats import topic_stats_dict
from magnetar.runtime import RealClock, TaskSupervisor


def test_nonpersistent_topic_stats() -> None:
    ref = parse_topic("non-persistent://public/default/np-stats")
    topic = NonPersistentTopic(ref, BrokerConfig(), RealClock(), TaskSupervisor("t"))
    stats = topic_stats_dict(topic, "http://localhost:8080")
    for key in ("storageSize", "backlogSize", "offloadedStorageSize", "lastOffloadLedgerId"):
        assert stats[key] == 0, key
    assert stats["subscriptions"] == {} and stats["publishers"] == []
    assert stats["oldestBacklogMessageAgeSeconds"] == -1
