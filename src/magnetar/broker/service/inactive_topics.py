"""Inactive topic deletion (``brokerDeleteInactiveTopics*``), as Pulsar's GC of idle topics.

Theory of operation
-------------------
The broker's sweep (every ``brokerDeleteInactiveTopicsFrequencySeconds``)
hands each topic idle for at least
``brokerDeleteInactiveTopicsMaxInactiveDurationSeconds`` (default: the
frequency) -- no producer, no consumer, nothing published -- to
:func:`retire_inactive_topic`, which *deletes* it when the mode allows and
otherwise only unloads it (ledger closed, data kept, memory freed):

* ``delete_when_no_subscriptions`` (Pulsar's default): deletable when the
  topic has no durable subscription (the ``pulsar.dedup`` cursor is not a
  subscription);
* ``delete_when_subscriptions_caught_up``: deletable when every durable
  subscription has an empty backlog.

Never deleted, only unloaded: system topics, partitions of a partitioned
topic (the partitioned metadata would outlive them), and topics whose
namespace or broker sets a retention policy (their data is meant to stay).
A non-persistent topic has no data and is simply dropped from the registry.
Deletion goes through the registry (``force=False``), so a client that
attached meanwhile makes it fail harmlessly; the sweep logs and moves on.
"""

from __future__ import annotations

import logging
from typing import Any

from magnetar.broker.errors import BrokerError
from magnetar.managed_ledger.api import ManagedLedgerError
from magnetar.metadata import api as md

log = logging.getLogger(__name__)

MODE_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
MODE_CAUGHT_UP = "delete_when_subscriptions_caught_up"
SYSTEM_CURSORS = frozenset({"pulsar.dedup"})


def inactive_mode(config: Any) -> str:
    extra = getattr(config, "extra", {}) or {}
    mode = str(extra.get("brokerDeleteInactiveTopicsMode", MODE_NO_SUBSCRIPTIONS)).strip()
    return mode if mode in (MODE_NO_SUBSCRIPTIONS, MODE_CAUGHT_UP) else MODE_NO_SUBSCRIPTIONS


def max_inactive_ms(config: Any) -> int:
    extra = getattr(config, "extra", {}) or {}
    default_s = max(1, config.broker_delete_inactive_topics_frequency_seconds)
    try:
        return (
            max(1, int(extra.get("brokerDeleteInactiveTopicsMaxInactiveDurationSeconds", default_s))) * 1000
        )
    except (TypeError, ValueError):
        return default_s * 1000


def _durable_cursors(topic: Any) -> dict[str, Any]:
    return {n: c for n, c in topic.ml.cursors.items() if n not in SYSTEM_CURSORS}


async def _has_retention(service: Any, topic: Any) -> bool:
    cfg = service.config
    if cfg.default_retention_time_in_minutes or cfg.default_retention_size_in_mb:
        return True
    try:
        policies = await service.resources.namespaces.get(topic.ref.namespace)
    except md.MetadataError:
        return True  # cannot tell: keep the data
    retention = (policies or {}).get("retention_policies") or {}
    return bool(retention.get("retentionTimeInMinutes") or retention.get("retentionSizeInMB"))


async def deletable(service: Any, topic: Any) -> bool:
    ref = topic.ref
    if not ref.persistent:
        return True
    if getattr(ref, "is_system", False) or ref.is_partition:
        return False
    cursors = _durable_cursors(topic)
    if inactive_mode(service.config) == MODE_CAUGHT_UP:
        if any(c.number_of_entries_in_backlog() > 0 for c in cursors.values()):
            return False
    elif cursors or any(s.durable for s in topic.subscriptions.values()):
        return False
    return not await _has_retention(service, topic)


async def retire_inactive_topic(service: Any, topic: Any) -> str:
    """Delete or unload an idle topic; returns "deleted" or "unloaded"."""
    if await deletable(service, topic):
        try:
            await service.topics.delete(topic.ref, force=False)
            log.info("deleted inactive topic %s", topic.name)
            return "deleted"
        except (BrokerError, ManagedLedgerError, md.MetadataError) as exc:  # a client attached, or storage
            log.info("inactive topic %s not deleted (%s): unloading it", topic.name, exc)
    await service.topics.unload(topic.ref)
    return "unloaded"
