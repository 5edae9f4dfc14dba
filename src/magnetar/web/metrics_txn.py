"""Transaction metrics on ``/metrics`` in Pulsar's names (reference B.9 and the topic table).

Theory of operation: a Prometheus collector read at scrape time, nothing cached.  Per
coordinator (labels ``cluster``, ``coordinator_id``): ``pulsar_txn_active_count``,
``pulsar_txn_created_total``, ``pulsar_txn_committed_total``, ``pulsar_txn_aborted_total``,
``pulsar_txn_timeout_total``, ``pulsar_txn_append_log_total`` and
``pulsar_txn_execution_latency_le_*`` (open to committed/aborted, ms; each bucket counts its
own range, ``_overflow`` the rest).  Per topic with a transaction buffer (labels ``cluster``,
``namespace``, ``topic``): ``pulsar_txn_tb_active_total``, ``pulsar_txn_tb_aborted_total``,
``pulsar_txn_tb_committed_total``.  Nothing is emitted when transactions are disabled.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.service.api import MetricsSource
from magnetar.broker.transaction.coordinator import EXECUTION_LATENCY_BUCKETS_MS


class TransactionCollector(Collector):
    def __init__(self, service: MetricsSource) -> None:
        self._svc = service

    def collect(self) -> Iterator[Metric]:
        txns = getattr(self._svc, "transactions", None)
        if txns is None:
            return
        cluster = str(self._svc.config.cluster_name)
        labels = ["cluster", "coordinator_id"]
        fams: dict[str, GaugeMetricFamily] = {}

        def gauge(name: str, names: list[str], values: list[str], value: float) -> None:
            fam = fams.get(name)
            if fam is None:
                fam = fams[name] = GaugeMetricFamily(name, f"Pulsar metric {name}", labels=names)
            fam.add_metric(values, float(value))

        for tc in txns.loaded_coordinators():
            lv = [cluster, str(tc.tc_id)]
            gauge("pulsar_txn_active_count", labels, lv, len(tc.txns))
            gauge("pulsar_txn_created_total", labels, lv, tc.counters["created"])
            gauge("pulsar_txn_committed_total", labels, lv, tc.counters["committed"])
            gauge("pulsar_txn_aborted_total", labels, lv, tc.counters["aborted"])
            gauge("pulsar_txn_timeout_total", labels, lv, tc.counters["timedOut"])
            gauge("pulsar_txn_append_log_total", labels, lv, tc.log.appended)
            for bound, count in zip((*EXECUTION_LATENCY_BUCKETS_MS, None), tc.execution_latency, strict=True):
                suffix = f"le_{bound}" if bound is not None else "overflow"
                gauge(f"pulsar_txn_execution_latency_{suffix}", labels, lv, count)
        tl = ["cluster", "namespace", "topic"]
        for topic in self._svc.topics.loaded():
            buf = getattr(topic, "txn_buffer", None)
            if buf is None or not buf.transactional:
                continue
            tv = [cluster, topic.ref.namespace, topic.name]
            gauge("pulsar_txn_tb_active_total", tl, tv, len(buf.ongoing))
            gauge("pulsar_txn_tb_aborted_total", tl, tv, buf.aborted_count)
            gauge("pulsar_txn_tb_committed_total", tl, tv, buf.committed_count)
        yield from fams.values()
