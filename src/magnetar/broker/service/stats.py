"""Topic stats in Pulsar's TopicStats shape (admin-REST reference 11.6).

Theory of operation: counters live on the objects that change them (topic:
msgIn/bytesIn; consumers: msgOut/bytesOut; cursors: backlog); this module only
reads them into the JSON field names Pulsar uses.  Rates come from
``rates.py`` (sampled every ``statsUpdateFrequencyInSecs``).  Partitioned stats add the partitions' counters up and merge
subscriptions by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlparse

from magnetar.broker.replication.stats import merge_replication, replication_stats

if TYPE_CHECKING:
    from magnetar.broker.service.topic import PersistentTopic

_SUMMED = (
    "msgRateIn",
    "msgThroughputIn",
    "msgRateOut",
    "msgThroughputOut",
    "bytesInCounter",
    "msgInCounter",
    "bytesOutCounter",
    "msgOutCounter",
    "storageSize",
    "backlogSize",
)


def _txn_counts(topic: PersistentTopic) -> dict:
    """TopicStats' ongoingTxnCount / abortedTxnCount / committedTxnCount (transaction.buffer)."""
    buf = getattr(topic, "txn_buffer", None)
    if buf is None:
        return {"ongoingTxnCount": 0, "abortedTxnCount": 0, "committedTxnCount": 0}
    return {
        "ongoingTxnCount": len(buf.ongoing),
        "abortedTxnCount": buf.aborted_count,
        "committedTxnCount": buf.committed_count,
    }


def topic_stats_dict(topic: PersistentTopic, web_url: str) -> dict:
    subs = {name: s.to_stats() for name, s in sorted(topic.subscriptions.items())}
    replicator_cursors = {r.cursor.name for r in topic.replicators.values()}
    for name in sorted(topic.stored_cursors):
        # the dedup snapshot cursor and the replicators' cursors are no subscriptions
        if name not in subs and name != "pulsar.dedup" and name not in replicator_cursors:
            cursor = topic.stored_cursors[name]
            replicated = cursor.properties.get("pulsar.replicated.subscription") == 1
            backlog = cursor.number_of_entries_in_backlog()
            expired = topic.expired.get(name)
            subs[name] = {
                "msgRateOut": 0.0,
                "msgThroughputOut": 0.0,
                "bytesOutCounter": 0,
                "msgOutCounter": 0,
                "msgBacklog": backlog,
                "msgBacklogNoDelayed": backlog,
                "backlogSize": cursor.backlog_size_bytes(),
                "msgRateExpired": expired.rate.msg_rate if expired is not None else 0.0,
                "totalMsgExpired": expired.total if expired is not None else 0,
                "unackedMessages": 0,
                "type": "Exclusive",
                "consumers": [],
                "isDurable": True,
                "isReplicated": replicated,
                "durable": True,
                "replicated": replicated,
                "blockedSubscriptionOnUnackedMsgs": False,
            }
    msg_out = sum(s.get("msgOutCounter", 0) for s in subs.values())
    bytes_out = sum(s.get("bytesOutCounter", 0) for s in subs.values())
    host = urlparse(web_url).netloc
    return {
        "msgRateIn": topic.rate_in.msg_rate,
        "msgThroughputIn": topic.rate_in.byte_rate,
        "msgRateOut": float(sum(s.get("msgRateOut", 0.0) for s in subs.values())),
        "msgThroughputOut": float(sum(s.get("msgThroughputOut", 0.0) for s in subs.values())),
        "bytesInCounter": topic.bytes_in_counter,
        "msgInCounter": topic.msg_in_counter,
        "bytesOutCounter": bytes_out,
        "msgOutCounter": msg_out,
        "averageMsgSize": topic.bytes_in_counter / topic.msg_in_counter if topic.msg_in_counter else 0.0,
        "msgChunkPublished": False,
        "storageSize": topic.storage_size,
        # the slowest durable subscription's unacknowledged bytes (ack holes subtracted)
        "backlogSize": max(
            (s.get("backlogSize", 0) for s in subs.values() if s.get("isDurable", True)), default=0
        ),
        "earliestMsgPublishTimeInBacklogs": 0,
        **_offload_stats(topic),
        "oldestBacklogMessageAgeSeconds": topic.oldest_backlog_age_s,
        "publishRateLimitedTimes": topic.publish_rate_limited_times,
        **_txn_counts(topic),
        "publishers": [p.to_stats() for p in topic.producers.values()],
        "waitingPublishers": 0,
        "subscriptions": subs,
        "replication": replication_stats(topic, topic.clock.time_ms()),
        "deduplicationStatus": "Enabled" if topic.dedup is not None else "Disabled",
        "nonContiguousDeletedMessagesRanges": 0,
        "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        "delayedMessageIndexSizeInBytes": 0,
        "compaction": {
            "lastCompactionRemovedEventCount": 0,
            "lastCompactionSucceedTimestamp": 0,
            "lastCompactionFailedTimestamp": 0,
            "lastCompactionDurationTimeInMills": 0,
        },
        "ownerBroker": host,
        "topicCreationTimeStamp": topic.created_ms,
        "lastPublishTimeStamp": topic.last_publish_ms,
    }


def _offload_stats(topic: PersistentTopic) -> dict:
    """Tiered-storage figures; a non-persistent topic stores nothing, so all zero."""
    if not topic.ref.persistent:
        return dict.fromkeys(
            (
                "offloadedStorageSize",
                "lastOffloadLedgerId",
                "lastOffloadSuccessTimeStamp",
                "lastOffloadFailureTimeStamp",
            ),
            0,
        )
    offloaded = [li for li in topic.ml.ledgers() if li.offloaded]
    state = getattr(topic.ml, "offload_state", None)
    return {
        "offloadedStorageSize": sum(li.size_bytes for li in offloaded),
        "lastOffloadLedgerId": max((li.ledger_id for li in offloaded), default=0),
        "lastOffloadSuccessTimeStamp": getattr(state, "last_success_ms", 0),
        "lastOffloadFailureTimeStamp": getattr(state, "last_failure_ms", 0),
    }


def merge_topic_stats(parts: list[dict]) -> dict:
    out: dict = {k: (0.0 if "Rate" in k or "Throughput" in k else 0) for k in _SUMMED}
    out.update(
        {
            "averageMsgSize": 0.0,
            "publishers": [],
            "subscriptions": {},
            "replication": {},
            "deduplicationStatus": "Disabled",
            "waitingPublishers": 0,
            "msgChunkPublished": False,
        }
    )
    for p in parts:
        for k in _SUMMED:
            out[k] += p.get(k, 0)
        out["publishers"].extend(p.get("publishers", []))
        for name, sub in p.get("subscriptions", {}).items():
            agg = out["subscriptions"].setdefault(name, {**sub, "consumers": []})
            if agg is not sub and agg.get("_merged"):
                for k in (
                    "msgBacklog",
                    "msgOutCounter",
                    "bytesOutCounter",
                    "unackedMessages",
                    "msgBacklogNoDelayed",
                    "backlogSize",
                    "totalMsgExpired",
                    "msgRateExpired",
                ):
                    agg[k] = agg.get(k, 0) + sub.get(k, 0)
            agg["_merged"] = True
            agg["consumers"].extend(sub.get("consumers", []))
    for sub in out["subscriptions"].values():
        sub.pop("_merged", None)
    out["replication"] = merge_replication([p.get("replication", {}) for p in parts])
    if out["msgInCounter"]:
        out["averageMsgSize"] = out["bytesInCounter"] / out["msgInCounter"]
    return out
