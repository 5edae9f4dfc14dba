"""Resource-group metrics on ``/metrics`` in Pulsar's names.

Theory of operation: a Prometheus collector read at scrape time from the
broker's resource-group limiters (``broker.service.resource_groups``),
nothing cached; nothing is emitted while no group is known.  Labels are
Pulsar's: ``ResourceGroup`` and ``MonitoringClass`` (``Publish`` /
``Dispatch``).

* ``pulsar_resource_group_calculated_messages_quota`` /
  ``pulsar_resource_group_calculated_bytes_quota``: this broker's share of the
  group's quota per second (-1: no limit);
* ``pulsar_resource_group_messages_used`` / ``pulsar_resource_group_bytes_used``:
  messages and bytes published / dispatched in the group on this broker since
  it started;
* ``pulsar_resource_group_namespace_registers`` (label ``ResourceGroup``):
  namespaces attached to the group.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.service.api import MetricsSource

LABELS = ["ResourceGroup", "MonitoringClass"]
_PER_CLASS = (
    ("pulsar_resource_group_calculated_messages_quota", "Messages quota calculated for resource group",
     {"Publish": "publishRateInMsgs", "Dispatch": "dispatchRateInMsgs"}),
    ("pulsar_resource_group_calculated_bytes_quota", "Bytes quota calculated for resource group",
     {"Publish": "publishRateInBytes", "Dispatch": "dispatchRateInBytes"}),
    ("pulsar_resource_group_messages_used", "Messages used within this resource group on this broker",
     {"Publish": "publishedMsgs", "Dispatch": "dispatchedMsgs"}),
    ("pulsar_resource_group_bytes_used", "Bytes used within this resource group on this broker",
     {"Publish": "publishedBytes", "Dispatch": "dispatchedBytes"}),
)  # fmt: skip


class ResourceGroupCollector(Collector):
    def __init__(self, service: MetricsSource) -> None:
        self._svc = service

    def collect(self) -> Iterator[Metric]:
        groups = getattr(self._svc, "resource_groups", None)
        stats = groups.statistics() if groups is not None else {}
        if not stats:
            return
        for name, help_text, keys in _PER_CLASS:
            fam = GaugeMetricFamily(name, help_text, labels=LABELS)
            for group, s in stats.items():
                for klass, key in keys.items():
                    fam.add_metric([group, klass], float(s[key]))
            yield fam
        fam = GaugeMetricFamily(
            "pulsar_resource_group_namespace_registers", "Namespaces attached to the resource group",
            labels=["ResourceGroup"],
        )  # fmt: skip
        for group, s in stats.items():
            fam.add_metric([group], float(len(s["namespaces"])))
        yield fam
