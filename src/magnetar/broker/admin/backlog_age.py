"""The ``message_age`` backlog quota: a time limit on the oldest unacknowledged message.

Theory of operation: a backlog quota of type ``message_age`` (``limitTime`` seconds,
with a policy) is checked by the policy enforcer's pass on every loaded persistent
topic.  The age of the backlog is that of its oldest unacknowledged message: for each
durable subscription, the entry right after its mark-delete position (the first one it
has not acknowledged); the oldest publish time among them.  When that message is older
than ``limitTime``:

* ``producer_request_hold`` / ``producer_exception`` -- the topic is marked over the
  quota (``topic.backlog_age_exceeded``, read by producer admission in
  ``broker.service.admission``), its producers are disconnected, and new ones are refused with
  ProducerBlockedQuotaExceededError / ...Exception until the subscriptions catch up;
* ``consumer_backlog_eviction`` -- every subscription's messages older than the limit
  are skipped (the mark-delete moves past them, as message TTL does).

On such topics the age is also the ``oldestBacklogMessageAgeSeconds`` stat.  Reading one
entry per durable subscription per pass (the entry cache usually has it) is the cost, paid
only on topics under a ``message_age`` quota.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from magnetar.broker.service.admission import QUOTA_BLOCKING
from magnetar.broker.service.topic import PersistentTopic
from magnetar.managed_ledger.api import ManagedLedgerError, Position
from magnetar.protocol.errors import CorruptPayload

log = logging.getLogger(__name__)


async def oldest_unacked_publish_ms(
    topic: PersistentTopic, publish_time_of: Callable[[bytes], int]
) -> int | None:
    """Publish time of the oldest message some durable subscription has not acknowledged."""
    oldest: int | None = None
    for name, cursor in list(topic.ml.cursors.items()):
        if not getattr(cursor, "durable", True) or name.startswith("pulsar."):
            continue
        md = cursor.mark_delete_position
        try:
            entries = await topic.ml.read_entries_from(Position(md.ledger_id, md.entry_id + 1), 1)
        except ManagedLedgerError:
            continue
        if not entries:
            continue
        try:
            published = publish_time_of(entries[0].data)
        except CorruptPayload:  # an entry without readable metadata does not age the backlog
            continue
        oldest = published if oldest is None else min(oldest, published)
    return oldest


async def apply_message_age_quota(
    topic: PersistentTopic,
    quota: Mapping[str, Any] | None,
    now_ms: int,
    publish_time_of: Callable[[bytes], int],
) -> None:
    limit_s = (quota or {}).get("limitTime", -1)
    if not quota or limit_s is None or limit_s < 0:
        topic.backlog_age_exceeded = False
        return
    oldest = await oldest_unacked_publish_ms(topic, publish_time_of)
    topic.oldest_backlog_age_s = -1 if oldest is None else max(0, (now_ms - oldest) // 1000)
    exceeded = oldest is not None and now_ms - oldest > limit_s * 1000
    policy = quota.get("policy")
    if policy in QUOTA_BLOCKING:
        topic.backlog_age_exceeded = exceeded
        if exceeded:
            for producer in list(topic.producers.values()):
                log.info(
                    "message_age backlog quota exceeded on %s: disconnecting producer %s",
                    topic.name,
                    producer.producer_name,
                )
                producer.cnx.broker_closed_producer(producer)
                topic.remove_producer(producer)
        return
    topic.backlog_age_exceeded = False
    if policy != "consumer_backlog_eviction" or not exceeded:
        return
    for name, cursor in list(topic.ml.cursors.items()):
        if not getattr(cursor, "durable", True) or name.startswith("pulsar."):
            continue
        if await cursor.expire_messages(limit_s * 1000, publish_time_of):
            sub = topic.subscriptions.get(name)
            if sub is not None and sub.dispatcher is not None:
                sub.dispatcher.notify()
