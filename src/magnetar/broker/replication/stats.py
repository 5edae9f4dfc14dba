"""The ``replication`` section of topic stats and the ``pulsar_replication_*`` metrics.

Theory of operation: a topic's stats name every cluster it exchanges messages
with.  Outbound figures come from the topic's replicators (``msgRateOut``,
``msgThroughputOut``, ``replicationBacklog``, ``connected``,
``replicationDelayInSeconds``, ``outboundConnection``); inbound figures from the
producer a remote cluster's replicator keeps on this topic (its name is
``<replicatorPrefix>.<remote cluster>``: ``msgRateIn``, ``msgThroughputIn``,
``inboundConnection``, ``inboundConnectedSince``).  Field names are Pulsar's
ReplicatorStats; metric names Pulsar's, labelled by ``remote_cluster``.
Nothing here does I/O: the figures are what the counters say now.
"""

from __future__ import annotations

import datetime
from typing import Any

from magnetar.broker.replication.replicator import REPLICATOR_PREFIX


def _iso(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat().replace("+00:00", "Z")


def _empty() -> dict[str, Any]:
    return {
        "msgRateIn": 0.0,
        "msgThroughputIn": 0.0,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "msgRateExpired": 0.0,
        "replicationBacklog": 0,
        "connected": False,
        "replicationDelayInSeconds": 0,
        "inboundConnection": "",
        "inboundConnectedSince": "",
        "outboundConnection": "",
        "outboundConnectedSince": "",
    }


def replication_stats(topic: Any, now_ms: int, prefix: str = REPLICATOR_PREFIX) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for remote, r in getattr(topic, "replicators", {}).items():
        st = out.setdefault(remote, _empty())
        producer = r.producer
        st.update(
            msgRateOut=r.rate_out.msg_rate,
            msgThroughputOut=r.rate_out.byte_rate,
            msgOutCounter=r.msg_out,
            bytesOutCounter=r.bytes_out,
            replicationBacklog=r.backlog(),
            connected=r.connected,
            replicationDelayInSeconds=r.delay_s(now_ms),
            outboundConnection=producer.remote_address if producer is not None and r.connected else "",
            outboundConnectedSince=_iso(producer.connected_since_ms) if producer is not None else "",
        )
        if r.last_error:
            st["lastError"] = r.last_error
    head = prefix + "."
    for name, p in topic.producers.items():
        if not name.startswith(head):
            continue
        st = out.setdefault(name[len(head) :], _empty())
        st.update(
            msgRateIn=p.rate.msg_rate,
            msgThroughputIn=p.rate.byte_rate,
            inboundConnection=p.cnx.peer_address,
            inboundConnectedSince=_iso(p.stats.connected_since_ms),
        )
    return out


# (metric name, ReplicatorStats field) -- Pulsar's pulsar_replication_* gauges
METRICS: tuple[tuple[str, str], ...] = (
    ("pulsar_replication_rate_in", "msgRateIn"),
    ("pulsar_replication_rate_out", "msgRateOut"),
    ("pulsar_replication_throughput_in", "msgThroughputIn"),
    ("pulsar_replication_throughput_out", "msgThroughputOut"),
    ("pulsar_replication_backlog", "replicationBacklog"),
    ("pulsar_replication_rate_expired", "msgRateExpired"),
    ("pulsar_replication_delay_in_seconds", "replicationDelayInSeconds"),
)


def merge_replication(parts: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """A partitioned topic's ``replication`` section: per cluster, rates and backlogs summed,
    ``connected`` only when every partition's replicator is, the largest delay."""
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for remote, st in part.items():
            agg = out.get(remote)
            if agg is None:
                out[remote] = dict(st)
                continue
            for k in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgRateExpired",
                      "replicationBacklog", "msgOutCounter", "bytesOutCounter"):  # fmt: skip
                if k in st:
                    agg[k] = agg.get(k, 0) + st[k]
            agg["connected"] = bool(agg.get("connected")) and bool(st.get("connected"))
            agg["replicationDelayInSeconds"] = max(
                agg.get("replicationDelayInSeconds", 0), st.get("replicationDelayInSeconds", 0)
            )
    return out
