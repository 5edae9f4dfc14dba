"""Typed catches where a broad ``except Exception`` used to hide a failure (house5 of issue 14).

Retiring an inactive topic unloads it instead when the delete fails for a reason the broker
expects (a client attached meanwhile: PreconditionFailed; storage: ManagedLedgerError,
MetadataError); any other error -- a bug -- now reaches the inactive-topic monitor instead of
silently turning into an unload.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from magnetar.broker import errors
from magnetar.broker.service.inactive_topics import retire_inactive_topic
from magnetar.broker.service.names import parse_topic
from magnetar.managed_ledger.api import ManagedLedgerStorageError
from magnetar.metadata import api as md


class Topics:
    def __init__(self, failure: BaseException | None) -> None:
        self.failure = failure
        self.unloaded: list[str] = []

    async def delete(self, ref: Any, force: bool = False) -> None:
        if self.failure is not None:
            raise self.failure

    async def unload(self, ref: Any) -> bool:
        self.unloaded.append(ref.full_name)
        return True


def _service(failure: BaseException | None) -> Any:
    config = SimpleNamespace(
        default_retention_time_in_minutes=0,
        default_retention_size_in_mb=0,
        broker_delete_inactive_topics_mode="delete_when_no_subscriptions",
        as_properties=lambda: {},
    )

    async def get(ns: str) -> dict:
        return {}

    resources = SimpleNamespace(namespaces=SimpleNamespace(get=get))
    return SimpleNamespace(config=config, resources=resources, topics=Topics(failure))


def _topic() -> Any:
    ref = parse_topic("persistent://public/default/idle")
    return SimpleNamespace(ref=ref, name=ref.full_name, ml=SimpleNamespace(cursors={}), subscriptions={})


async def test_a_deletable_idle_topic_is_deleted() -> None:
    assert await retire_inactive_topic(_service(None), _topic()) == "deleted"


@pytest.mark.parametrize(
    "failure",
    [
        errors.PreconditionFailedError("Topic has 1 connected producers/consumers"),
        ManagedLedgerStorageError("bookies gone"),
        md.SessionExpired("session expired"),
    ],
)
async def test_an_expected_failure_unloads_instead(failure: BaseException) -> None:
    svc = _service(failure)
    assert await retire_inactive_topic(svc, _topic()) == "unloaded"
    assert svc.topics.unloaded == ["persistent://public/default/idle"]


async def test_a_bug_is_not_read_as_a_reason_to_unload() -> None:
    svc = _service(KeyError("a bug"))
    with pytest.raises(KeyError):
        await retire_inactive_topic(svc, _topic())
    assert svc.topics.unloaded == []
