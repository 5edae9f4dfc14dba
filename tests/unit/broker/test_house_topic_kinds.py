"""Both topic kinds share ``BaseTopic``; a non-persistent topic has no ledger, not a stand-in.

Shared code asks a topic for its storage facts (``terminated``, ``stored_cursors``,
``number_of_entries``, ``storage_size``, ``internal_stats``) instead of reaching into
``topic.ml``; a non-persistent topic answers them as a topic that stores nothing, and
admission, stats, subscribe and unsubscribe work on it without any ledger.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.admission import backlog_bytes, check_producer, check_subscribe
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.nonpersistent_topic import NonPersistentSubscription, NonPersistentTopic
from magnetar.broker.service.topic import PersistentTopic
from magnetar.broker.service.topic_base import BaseTopic, TopicState
from magnetar.runtime import RealClock, TaskSupervisor

BROKER = Path(__file__).resolve().parents[3] / "src" / "magnetar" / "broker"


def _np_topic(name: str = "np-kinds") -> NonPersistentTopic:
    ref = parse_topic(f"non-persistent://public/default/{name}")
    return NonPersistentTopic(ref, BrokerConfig(), RealClock(), TaskSupervisor("t"))


def test_nonpersistent_topic_is_no_persistent_topic() -> None:
    topic = _np_topic()
    assert isinstance(topic, BaseTopic)
    assert not isinstance(topic, PersistentTopic)
    assert not hasattr(topic, "ml")
    assert topic.terminated is False
    assert dict(topic.stored_cursors) == {}
    assert topic.number_of_entries == 0 and topic.storage_size == 0
    assert topic.internal_stats()["numberOfEntries"] == 0
    assert topic.dedup is None and topic.txn_buffer is None and topic.replicators == {}


def test_admission_works_without_a_ledger() -> None:
    topic = _np_topic()
    check_producer(topic)
    check_subscribe(topic, "s", 1)
    assert backlog_bytes(topic) == 0


async def test_subscribe_unsubscribe_close_without_a_ledger() -> None:
    topic = _np_topic("np-lifecycle")
    sub = await topic.get_or_create_subscription("s", 0, True, None)
    assert isinstance(sub, NonPersistentSubscription)
    await topic.unsubscribe(sub)
    assert "s" not in topic.subscriptions and sub.closed
    await topic.get_or_create_subscription("t", 0, True, None)
    await topic.close()
    assert topic.state is TopicState.CLOSED and topic.subscriptions == {}
    await topic.close()  # closing twice is a no-op


@pytest.mark.parametrize(
    "rel",
    [
        "service/admission.py",
        "service/stats.py",
        "service/schemas.py",
        "service/nonpersistent_topic.py",
        "service/topic_base.py",
    ],
)
def test_shared_code_does_not_reach_into_a_ledger(rel: str) -> None:
    """Modules that handle both topic kinds use the storage facts, not ``topic.ml``."""
    tree = ast.parse((BROKER / rel).read_text())
    bad = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "ml"
        and isinstance(node.value, ast.Name)
        and node.value.id in {"topic", "t", "self"}
    ]
    # stats' tiered-storage figures read the ledger only after checking the topic is persistent
    allowed = 2 if rel == "service/stats.py" else 0
    assert len(bad) <= allowed, f"{rel}: topic.ml at lines {bad}"
