"""Topic administration has one owner per kind of operation (docs/broker-house.md).

A topic's state (stats, internal stats, subscriptions, cursor moves, peek, unload,
terminate) is ``broker.admin.topic_ops.TopicOps``; the BrokerService keeps only the
topic lifecycle it needs itself (partitioned metadata, create, list, delete).  A second
copy of an operation on the service, or the web layer calling around TopicOps, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.broker.service.broker_service import BrokerService

STATE_OPS = (
    "topic_stats",
    "partitioned_topic_stats",
    "internal_stats",
    "list_subscriptions",
    "unload_topic",
    "create_subscription",
    "delete_subscription",
    "skip",
    "skip_all",
    "expire_messages",
    "reset_by_time",
    "reset_by_position",
    "peek",
    "examine",
    "last_message_id",
    "terminate",
)
LIFECYCLE_OPS = (
    "get_partitioned_metadata",
    "create_partitioned_topic",
    "update_partitioned_topic",
    "create_non_partitioned_topic",
    "list_topics",
    "list_partitioned_topics",
    "delete_topic",
    "delete_partitioned_topic",
)
WEB = Path(__file__).resolve().parents[3] / "src" / "magnetar" / "web"


@pytest.mark.parametrize("op", STATE_OPS)
def test_topic_state_operations_live_in_topic_ops_only(op: str) -> None:
    assert callable(getattr(TopicOps, op, None)), op
    assert not hasattr(BrokerService, op), f"BrokerService.{op} duplicates TopicOps.{op}"


@pytest.mark.parametrize("op", LIFECYCLE_OPS)
def test_topic_lifecycle_operations_live_in_the_service_only(op: str) -> None:
    assert callable(getattr(BrokerService, op, None)), op
    assert not hasattr(TopicOps, op), f"TopicOps.{op} duplicates BrokerService.{op}"


def test_the_web_layer_reaches_topic_state_through_topic_ops() -> None:
    calls = re.compile(r"(broker_service|_svc\(request\)|\bsvc)\.(" + "|".join(STATE_OPS) + r")\(")
    bad = [
        f"{path.name}:{n}"
        for path in WEB.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if calls.search(line)
    ]
    assert not bad, bad
