"""Pulsar's own metric families on ``/metrics``: topic, subscription, broker, managed ledger.

Theory of operation: nothing is counted here.  At scrape time the collector
reads the counters that live on the broker's objects -- topic stats in
TopicStats shape (``broker.service.stats.topic_stats_dict``, the one owner of
those numbers), managed-ledger add latencies (``ml.add_latency`` /
``ml.ledger_add_latency``), the entry cache's hits and misses, the service's
connection and lookup counters and the authentication service's outcomes --
and writes them under Pulsar's names and labels so that Pulsar's Grafana
dashboards work unchanged:

* every series carries ``cluster``; per-topic series add ``namespace`` and
  ``topic`` (``exposeTopicLevelMetricsInPrometheus``, default true; when false
  the same names are summed per namespace), subscription series add
  ``subscription``, consumer series (``exposeConsumerLevelMetricsInPrometheus``)
  ``consumer_name`` and ``consumer_id``;
* Pulsar declares its per-topic stats as gauges, even ``*_total``; so do we.
  Latencies come as Pulsar's non-cumulative ``_le_*`` buckets plus ``_count``
  and ``_sum``, and ``pulsar_broker_publish_latency`` as a real Prometheus
  histogram (ms) of the same adds;
* entry sizes (``ml.entry_sizes``) come as ``pulsar_entry_size_le_128`` ..
  ``_le_1_mb``, ``_le_overflow``, ``_count``, ``_sum`` (bytes), the same kind
  of buckets; offloads as ``brk_ledgeroffloader_offload_error`` (failed runs)
  and ``_offload_rate`` (bytes/s) beside ``pulsar_storage_offloaded_size``;
* rates (``pulsar_ml_cache_hits_rate``, ``pulsar_storage_write_rate`` and
  ``_read_rate`` in entries/s ...) are differences between two scrapes
  divided by the time between them (0 on the first scrape; a scrape less than
  0.5 s after the last one repeats the last rate).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.replication.stats import METRICS as REPLICATION_METRICS
from magnetar.broker.service.api import MetricsSource
from magnetar.broker.service.stats import topic_stats_dict
from magnetar.common.latency import ENTRY_SIZE_SUFFIXES, WRITE_LATENCY_SUFFIXES, LatencyBuckets

_TOPIC_GAUGES = (
    # (metric, TopicStats field or callable(stats) -> value)
    ("pulsar_rate_in", "msgRateIn"),
    ("pulsar_rate_out", "msgRateOut"),
    ("pulsar_throughput_in", "msgThroughputIn"),
    ("pulsar_throughput_out", "msgThroughputOut"),
    ("pulsar_average_msg_size", "averageMsgSize"),
    ("pulsar_storage_size", "storageSize"),
    ("pulsar_storage_logical_size", "storageSize"),
    ("pulsar_storage_backlog_size", "backlogSize"),
    ("pulsar_storage_offloaded_size", "offloadedStorageSize"),
    ("pulsar_in_bytes_total", "bytesInCounter"),
    ("pulsar_in_messages_total", "msgInCounter"),
    ("pulsar_publish_rate_limit_times", "publishRateLimitedTimes"),
)
_SUB_GAUGES = (
    ("pulsar_subscription_back_log", "msgBacklog"),
    ("pulsar_subscription_back_log_no_delayed", "msgBacklogNoDelayed"),
    ("pulsar_subscription_delayed", "msgDelayed"),
    ("pulsar_subscription_unacked_messages", "unackedMessages"),
    ("pulsar_subscription_msg_rate_redeliver", "msgRateRedeliver"),
    ("pulsar_subscription_msg_rate_out", "msgRateOut"),
    ("pulsar_subscription_msg_throughput_out", "msgThroughputOut"),
    ("pulsar_subscription_msg_ack_rate", "messageAckRate"),
    ("pulsar_subscription_blocked_on_unacked_messages", "blockedSubscriptionOnUnackedMsgs"),
    ("pulsar_subscription_last_acked_timestamp", "lastAckedTimestamp"),
    ("pulsar_subscription_last_consumed_timestamp", "lastConsumedTimestamp"),
    ("pulsar_subscription_last_consumed_flow_timestamp", "lastConsumedFlowTimestamp"),
    ("pulsar_subscription_msg_rate_expired", "msgRateExpired"),
    ("pulsar_subscription_total_msg_expired", "totalMsgExpired"),
    ("pulsar_out_bytes_total", "bytesOutCounter"),
    ("pulsar_out_messages_total", "msgOutCounter"),
)
_CONSUMER_GAUGES = (
    ("pulsar_consumer_msg_rate_redeliver", "msgRateRedeliver"),
    ("pulsar_consumer_unacked_messages", "unackedMessages"),
    ("pulsar_consumer_blocked_on_unacked_messages", "blockedConsumerOnUnackedMsgs"),
    ("pulsar_consumer_msg_rate_out", "msgRateOut"),
    ("pulsar_consumer_msg_ack_rate", "messageAckRate"),
    ("pulsar_consumer_msg_throughput_out", "msgThroughputOut"),
    ("pulsar_consumer_available_permits", "availablePermits"),
)
_BROKER_TOTALS = (
    ("topics_count", None),
    ("subscriptions_count", None),
    ("producers_count", None),
    ("consumers_count", None),
    ("rate_in", "msgRateIn"),
    ("rate_out", "msgRateOut"),
    ("throughput_in", "msgThroughputIn"),
    ("throughput_out", "msgThroughputOut"),
    ("storage_size", "storageSize"),
    ("storage_logical_size", "storageSize"),
    ("storage_write_rate", None),
    ("storage_read_rate", None),
    ("msg_backlog", None),
)
# ML add-latency quantile labels as Pulsar writes them (pulsar_ml_AddEntryLatencyBuckets).
_ML_QUANTILES = ("0.0_0.5", "0.5_1.0", "1.0_5.0", "5.0_10.0", "10.0_20.0", "20.0_50.0", "50.0_100.0",
                 "100.0_200.0", "200.0_1000.0")  # fmt: skip


def _flag(props: dict[str, Any], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None:
        return default
    return str(value).strip().lower() == "true"


class _Families:
    """Metric families by name, created on first use, in first-use order (contiguous output)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}

    def gauge(self, name: str, labels: list[str], values: list[str], value: float) -> None:
        fam = self.by_name.get(name)
        if fam is None:
            fam = self.by_name[name] = GaugeMetricFamily(name, f"Pulsar metric {name}", labels=labels)
        fam.add_metric(values, float(value))


class PulsarBrokerCollector(Collector):
    def __init__(self, service: MetricsSource) -> None:
        self._svc = service
        self._last_cache: tuple[float, int, int] | None = None  # (time s, hits, misses)
        self._cache_rates = (0.0, 0.0)
        # topic -> (time s, entries added, entries read, bytes offloaded) at the previous scrape
        self._last_topic: dict[str, tuple[float, int, int, int]] = {}
        self._topic_rates: dict[str, tuple[float, float, float]] = {}
        self._prev_scrape: float | None = None

    def _props(self) -> dict[str, Any]:
        config = getattr(self._svc, "config", None)
        return config.as_properties() if config is not None and hasattr(config, "as_properties") else {}

    def collect(self) -> Iterator[Metric]:
        svc = self._svc
        topics_registry = getattr(svc, "topics", None)
        if topics_registry is None or not hasattr(svc, "web_service_url"):
            return
        props = self._props()
        cluster = str(getattr(svc.config, "cluster_name", props.get("clusterName", "standalone")))
        topic_level = _flag(props, "exposeTopicLevelMetricsInPrometheus", True)
        consumer_level = _flag(props, "exposeConsumerLevelMetricsInPrometheus", False)
        replication_metrics = _flag(props, "replicationMetricsEnabled", True)
        # (label names, label values, metric) -> value: pulsar_replication_* per remote cluster
        repl_sums: dict[tuple[tuple[str, ...], tuple[str, ...], str], float] = defaultdict(float)
        fams = _Families()
        totals: dict[str, float] = defaultdict(float)
        ns_sums: dict[tuple[str, str], float] = defaultdict(float)  # (namespace, metric) -> sum
        ns_latency: dict[str, LatencyBuckets] = {}
        broker_latency = LatencyBuckets()
        web_url = svc.web_service_url()
        now = svc.clock.monotonic()
        seen: set[str] = set()
        for topic in topics_registry.loaded():
            ml = getattr(topic, "ml", None)  # None: a non-persistent topic (no storage figures)
            try:
                stats = topic_stats_dict(topic, web_url)
            except Exception:
                continue
            ns = topic.ref.namespace
            seen.add(topic.name)
            write_rate, read_rate, offload_rate = self._storage_rates(topic.name, ml, now)
            subs = stats["subscriptions"]
            counts = {
                "pulsar_subscriptions_count": len(subs),
                "pulsar_producers_count": len(stats["publishers"]),
                "pulsar_consumers_count": sum(len(s.get("consumers", [])) for s in subs.values()),
            }
            backlog = sum(s.get("msgBacklog", 0) for s in subs.values())
            totals["topics_count"] += 1
            totals["subscriptions_count"] += counts["pulsar_subscriptions_count"]
            totals["producers_count"] += counts["pulsar_producers_count"]
            totals["consumers_count"] += counts["pulsar_consumers_count"]
            totals["msg_backlog"] += backlog
            totals["storage_write_rate"] += write_rate
            totals["storage_read_rate"] += read_rate
            for _, field in _BROKER_TOTALS:
                if field is not None:
                    totals[field] += stats.get(field, 0)
            add_latency = getattr(ml, "add_latency", None)
            ledger_latency = getattr(ml, "ledger_add_latency", None)
            if add_latency is not None:
                broker_latency.merge([add_latency])
                ns_latency.setdefault(ns, LatencyBuckets()).merge([add_latency])
            values: list[tuple[str, float]] = [(n, v) for n, v in counts.items()]
            values += [(name, float(stats.get(field, 0))) for name, field in _TOPIC_GAUGES]
            values.append(("pulsar_msg_backlog", backlog))
            values.append(("pulsar_storage_write_rate", write_rate))
            values.append(("pulsar_storage_read_rate", read_rate))
            entry_sizes = getattr(ml, "entry_sizes", None)
            if entry_sizes is not None:
                values += _size_values(entry_sizes)
            offload = getattr(ml, "offload_state", None)
            if offload is not None:
                values.append(("brk_ledgeroffloader_offload_error", float(offload.errors_total)))
                values.append(("brk_ledgeroffloader_offload_rate", offload_rate))
            for prefix, lat in (
                ("pulsar_storage_write_latency", add_latency),
                ("pulsar_storage_ledger_write_latency", ledger_latency),
            ):
                if lat is not None:
                    values += _bucket_values(prefix, lat)
            if topic_level:
                tl = ["cluster", "namespace", "topic"]
                tv = [cluster, ns, topic.name]
                for name, value in values:
                    fams.gauge(name, tl, tv, value)
                for sub_name, sub in subs.items():
                    sl, sv = [*tl, "subscription"], [*tv, sub_name]
                    fams.gauge("pulsar_subscription_consumers_count", sl, sv, len(sub.get("consumers", [])))
                    for name, field in _SUB_GAUGES:
                        fams.gauge(name, sl, sv, float(sub.get(field, 0) or 0))
                    if consumer_level:
                        for i, c in enumerate(sub.get("consumers", [])):
                            cl = [*sl, "consumer_name", "consumer_id"]
                            cv = [*sv, str(c.get("consumerName", "")), str(i)]
                            for name, field in _CONSUMER_GAUGES:
                                fams.gauge(name, cl, cv, float(c.get(field, 0) or 0))
            else:
                ns_sums[(ns, "pulsar_topics_count")] += 1
                for name, value in values:
                    ns_sums[(ns, name)] += value
            if replication_metrics:
                for remote, rs in stats.get("replication", {}).items():
                    rl, rv = ["cluster", "namespace", "remote_cluster"], [cluster, ns, remote]
                    if topic_level:
                        rl, rv = [*rl, "topic"], [*rv, topic.name]
                    for name, field in REPLICATION_METRICS:
                        repl_sums[(tuple(rl), tuple(rv), name)] += float(rs.get(field, 0) or 0)
                    connected = 1.0 if rs.get("connected") else 0.0
                    repl_sums[(tuple(rl), tuple(rv), "pulsar_replication_connected_count")] += connected
        self._prev_scrape = now
        for gone in set(self._last_topic) - seen:  # unloaded topics: forget their counters
            del self._last_topic[gone]
            self._topic_rates.pop(gone, None)
        for (ns, name), value in ns_sums.items():
            fams.gauge(name, ["cluster", "namespace"], [cluster, ns], value)
        for (rl, rv, name), value in repl_sums.items():
            fams.gauge(name, list(rl), list(rv), value)
        if not totals.get("topics_count"):
            # Pulsar prints these with value 0 when the broker owns no topic (dashboards see it).
            for name in ("topics_count", "subscriptions_count", "producers_count", "consumers_count",
                         "rate_in", "rate_out", "throughput_in", "throughput_out", "storage_size",
                         "storage_logical_size", "storage_write_rate", "storage_read_rate",
                         "msg_backlog"):  # fmt: skip
                fams.gauge(f"pulsar_{name}", ["cluster"], [cluster], 0.0)
        for name, field in _BROKER_TOTALS:
            fams.gauge(f"pulsar_broker_{name}", ["cluster"], [cluster], totals.get(field or name, 0.0))
        for ns, lat in sorted(ns_latency.items()):
            for q, c in zip(_ML_QUANTILES, lat.counts, strict=False):
                fams.gauge(
                    "pulsar_ml_AddEntryLatencyBuckets",
                    ["cluster", "namespace", "quantile"],
                    [cluster, ns, q],
                    c,
                )
            fams.gauge(
                "pulsar_ml_AddEntryLatencyBuckets_OVERFLOW",
                ["cluster", "namespace"],
                [cluster, ns],
                lat.counts[-1],
            )
        yield from fams.by_name.values()
        yield _histogram(
            "pulsar_broker_publish_latency",
            "Publish latency (ms): receipt of a message to its storage ack",
            cluster,
            broker_latency,
        )
        yield from self._ml_cache(cluster)
        yield from self._service_counters(cluster)

    def _storage_rates(self, name: str, ml: Any, now: float) -> tuple[float, float, float]:
        """Entries/s written and read, bytes/s offloaded, since the previous scrape (kept until
        a scrape at least 0.5 s later, so that two scrapers do not zero each other)."""
        reader = getattr(ml, "reader", None)
        offload = getattr(ml, "offload_state", None)
        current = (
            int(getattr(ml, "entries_added", 0)),
            int(getattr(reader, "entries_read", 0)),
            int(getattr(offload, "offloaded_bytes", 0)),
        )
        last = self._last_topic.get(name)
        if last is None:
            if self._prev_scrape is None:  # the first scrape: no interval yet
                self._last_topic[name] = (now, *current)
                return (0.0, 0.0, 0.0)
            # Loaded since the previous scrape: its counters started at 0 (a managed ledger
            # counts from its opening), so the interval since that scrape covers them all.
            last = self._last_topic[name] = (self._prev_scrape, 0, 0, 0)
        dt = now - last[0]
        if dt >= 0.5:
            self._topic_rates[name] = tuple(  # type: ignore[assignment]
                (c - p) / dt for c, p in zip(current, last[1:], strict=True)
            )
            self._last_topic[name] = (now, *current)
        return self._topic_rates.get(name, (0.0, 0.0, 0.0))

    def _ml_cache(self, cluster: str) -> Iterator[Metric]:
        factory = getattr(self._svc, "ml_factory", None)
        stats_fn = getattr(factory, "stats", None)
        if stats_fn is None:
            return
        stats = stats_fn()
        now = self._svc.clock.monotonic()
        hits, misses = int(stats.get("cacheHits", 0)), int(stats.get("cacheMisses", 0))
        if self._last_cache is not None and now > self._last_cache[0]:
            dt = now - self._last_cache[0]
            self._cache_rates = ((hits - self._last_cache[1]) / dt, (misses - self._last_cache[2]) / dt)
        self._last_cache = (now, hits, misses)
        fams = _Families()
        lc, lv = ["cluster"], [cluster]
        fams.gauge("pulsar_ml_count", lc, lv, stats.get("openLedgers", 0))
        fams.gauge("pulsar_ml_cache_used_size", lc, lv, stats.get("cacheSize", 0))
        fams.gauge("pulsar_ml_cache_entries", lc, lv, stats.get("cacheEntries", 0))
        fams.gauge("pulsar_ml_cache_evictions", lc, lv, stats.get("cacheEvictions", 0))
        fams.gauge("pulsar_ml_cache_hits_rate", lc, lv, self._cache_rates[0])
        fams.gauge("pulsar_ml_cache_misses_rate", lc, lv, self._cache_rates[1])
        yield from fams.by_name.values()
        yield _counter("pulsar_ml_cache_hits", "Entry cache hits", cluster, hits)
        yield _counter("pulsar_ml_cache_misses", "Entry cache misses", cluster, misses)

    def _service_counters(self, cluster: str) -> Iterator[Metric]:
        svc = self._svc
        counters = getattr(svc, "counters", {})
        fams = _Families()
        lc, lv = ["cluster"], [cluster]
        fams.gauge("pulsar_active_connections", lc, lv, len(getattr(svc, "connections", ())))
        fams.gauge("pulsar_connection_created_total_count", lc, lv, counters.get("connections_created", 0))
        fams.gauge("pulsar_connection_create_success_count", lc, lv, counters.get("connections_created", 0))
        fams.gauge("pulsar_connection_create_fail_count", lc, lv, 0)
        fams.gauge("pulsar_connection_closed_total_count", lc, lv, counters.get("connections_closed", 0))
        fams.gauge("pulsar_broker_lookup_answers", lc, lv, counters.get("lookup_answers", 0))
        fams.gauge("pulsar_broker_lookup_failures", lc, lv, counters.get("lookup_failures", 0))
        fams.gauge("pulsar_broker_lookup_redirects", lc, lv, 0)
        yield from fams.by_name.values()
        lookups = SummaryFamily("pulsar_broker_lookup", "Lookup latency (ms)", cluster)
        lookups.add(counters.get("lookup_answers", 0), counters.get("lookup_latency_ms", 0.0))
        yield lookups.family
        outcomes = getattr(getattr(svc, "authentication", None), "outcomes", {})
        ok = CounterMetricFamily("pulsar_authentication_success", "Successful authentications",
                                 labels=["cluster", "provider_name", "auth_method"])  # fmt: skip
        bad = CounterMetricFamily("pulsar_authentication_failures", "Failed authentications",
                                  labels=["cluster", "provider_name", "auth_method", "reason"])  # fmt: skip
        for (outcome, method, reason), n in sorted(outcomes.items()):
            provider = _PROVIDER_NAMES.get(method, method)
            if outcome == "success":
                ok.add_metric([cluster, provider, method], n)
            else:
                bad.add_metric([cluster, provider, method, reason], n)
        yield ok
        yield bad


_PROVIDER_NAMES = {
    "token": "AuthenticationProviderToken",
    "bearer": "AuthenticationProviderToken",
    "basic": "AuthenticationProviderBasic",
    "tls": "AuthenticationProviderTls",
}


class SummaryFamily:
    def __init__(self, name: str, doc: str, cluster: str) -> None:
        from prometheus_client.core import SummaryMetricFamily

        self.family = SummaryMetricFamily(name, doc, labels=["cluster"])
        self.cluster = cluster

    def add(self, count: float, total: float) -> None:
        self.family.add_metric([self.cluster], count_value=count, sum_value=total)


def _bucket_values(prefix: str, lat: LatencyBuckets) -> list[tuple[str, float]]:
    out = [
        (f"{prefix}_{suffix}", float(c))
        for suffix, c in zip(WRITE_LATENCY_SUFFIXES, lat.counts, strict=False)
    ]
    out.append((f"{prefix}_overflow", float(lat.counts[-1])))
    out.append((f"{prefix}_count", float(lat.count)))
    out.append((f"{prefix}_sum", lat.sum_ms))
    return out


def _size_values(sizes: LatencyBuckets) -> list[tuple[str, float]]:
    out = [
        (f"pulsar_entry_size_{suffix}", float(c))
        for suffix, c in zip(ENTRY_SIZE_SUFFIXES, sizes.counts, strict=False)
    ]
    out.append(("pulsar_entry_size_le_overflow", float(sizes.counts[-1])))
    out.append(("pulsar_entry_size_count", float(sizes.count)))
    out.append(("pulsar_entry_size_sum", sizes.sum_ms))
    return out


def _histogram(name: str, doc: str, cluster: str, lat: LatencyBuckets) -> Metric:
    fam = HistogramMetricFamily(name, doc, labels=["cluster"])
    buckets = [("+Inf" if b == float("inf") else f"{b:g}", float(c)) for b, c in lat.cumulative()]
    fam.add_metric([cluster], buckets, sum_value=lat.sum_ms)
    return fam


def _counter(name: str, doc: str, cluster: str, value: float) -> Metric:
    fam = CounterMetricFamily(name, doc, labels=["cluster"])
    fam.add_metric([cluster], value)
    return fam
