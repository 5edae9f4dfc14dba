"""Load-balancing metrics on ``/metrics`` in Pulsar's names (reference B.8).

Theory of operation: a Prometheus collector read at scrape time from the broker's load
manager (``broker.loadbalance``), nothing cached; nothing is emitted without one (a
standalone).  Resource usage in percent (labels ``cluster``, ``broker``,
``metric="loadBalancing"``): ``pulsar_lb_cpu_usage``, ``pulsar_lb_memory_usage``,
``pulsar_lb_directMemory_usage``, ``pulsar_lb_bandwidth_in_usage``,
``pulsar_lb_bandwidth_out_usage``; the leader's actions: ``pulsar_lb_unload_bundle_total``
(``metric="bundleUnloading"``) and ``pulsar_lb_bundles_split_total``
(``metric="bundlesSplit"``); per bundle of the last report (labels ``broker``, ``bundle``,
``metric="bundle"``): ``pulsar_bundle_msg_rate_in|out``, ``pulsar_bundle_msg_throughput_in|out``,
``pulsar_bundle_topics_count``, ``pulsar_bundle_producer_count``, ``pulsar_bundle_consumer_count``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.loadbalance.data import LoadReport
from magnetar.broker.service.api import MetricsSource

_USAGE = (
    ("pulsar_lb_cpu_usage", "cpu"),
    ("pulsar_lb_memory_usage", "memory"),
    ("pulsar_lb_directMemory_usage", "direct_memory"),
    ("pulsar_lb_bandwidth_in_usage", "bandwidth_in"),
    ("pulsar_lb_bandwidth_out_usage", "bandwidth_out"),
)
_BUNDLE = (
    ("pulsar_bundle_msg_rate_in", "msg_rate_in"),
    ("pulsar_bundle_msg_rate_out", "msg_rate_out"),
    ("pulsar_bundle_msg_throughput_in", "throughput_in"),
    ("pulsar_bundle_msg_throughput_out", "throughput_out"),
    ("pulsar_bundle_topics_count", "topics"),
    ("pulsar_bundle_producer_count", "producers"),
    ("pulsar_bundle_consumer_count", "consumers"),
)


class LoadBalanceCollector(Collector):
    def __init__(self, service: MetricsSource) -> None:
        self._svc = service

    def collect(self) -> Iterator[Metric]:
        lm = getattr(getattr(self._svc, "namespace_service", None), "load_manager", None)
        if lm is None:
            return
        cluster = str(self._svc.config.cluster_name)
        broker = self._svc.web_service_url().split("://", 1)[-1]
        doc = lm.local_report()
        report = LoadReport.from_json_dict(broker, doc) if doc else None
        labels = ["cluster", "broker", "metric"]
        if report is not None:
            for name, attr in _USAGE:
                fam = GaugeMetricFamily(name, f"Pulsar metric {name} (percent)", labels=labels)
                fam.add_metric([cluster, broker, "loadBalancing"], getattr(report, attr).percent)
                yield fam
        counters = lm.stats().get("counters", {})
        for name, key, metric in (
            ("pulsar_lb_unload_bundle_total", "bundles_unloaded", "bundleUnloading"),
            ("pulsar_lb_bundles_split_total", "bundles_split", "bundlesSplit"),
        ):
            fam = GaugeMetricFamily(name, f"Pulsar metric {name}", labels=labels)
            fam.add_metric([cluster, broker, metric], float(counters.get(key, 0)))
            yield fam
        if report is None:
            return
        blabels = ["cluster", "broker", "bundle", "metric"]
        for name, attr in _BUNDLE:
            fam = GaugeMetricFamily(name, f"Pulsar metric {name}", labels=blabels)
            for bundle, load in sorted(report.bundles.items()):
                fam.add_metric([cluster, broker, bundle, "bundle"], float(getattr(load, attr)))
            yield fam
