"""Process, event-loop and in-process bookie metrics for ``/metrics``.

Theory of operation: three collectors, each reading state owned elsewhere.

* ``process_*`` -- prometheus-client's ProcessCollector (``/proc``: CPU
  seconds, resident and virtual memory, open and max fds, start time), the
  JVM-free part of what Pulsar exports.
* ``pulsar_event_loop_lag_seconds`` (last sample) and
  ``pulsar_event_loop_lag_max_seconds`` (since the previous scrape): a task
  sleeps ``LAG_INTERVAL_S`` and records how late it woke up -- the delay every
  callback on the loop suffered at that moment.  The task is owned by the
  broker's TaskSupervisor and stops with it.
* the standalone's bookie, in BookKeeper's names: ``bookie_SERVER_STATUS``
  (1 writable, 0 read-only), ``bookie_journal_JOURNAL_ADD_ENTRY`` (enqueue ->
  durable, per record), ``bookie_journal_JOURNAL_SYNC`` (one group's write +
  fsync) and ``bookkeeper_server_ADD_ENTRY_REQUEST`` (a whole add on the
  bookie), as summaries in milliseconds plus the same ``_le_*`` buckets the
  storage latencies use.  Registered by the composition root that owns the
  bookie (``app.standalone``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from magnetar.common.latency import WRITE_LATENCY_SUFFIXES, LatencyBuckets

LAG_INTERVAL_S = 0.25


class EventLoopLag(Collector):
    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self.last_s = 0.0
        self.max_s = 0.0

    async def run(self) -> None:
        while True:
            t0 = self._clock.monotonic()
            await asyncio.sleep(LAG_INTERVAL_S)
            lag = max(0.0, self._clock.monotonic() - t0 - LAG_INTERVAL_S)
            self.last_s = lag
            self.max_s = max(self.max_s, lag)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "pulsar_event_loop_lag_seconds", "How late the event loop ran a timer", self.last_s
        )
        yield GaugeMetricFamily(
            "pulsar_event_loop_lag_max_seconds", "Largest event-loop lag since the last scrape", self.max_s
        )
        self.max_s = self.last_s


class BookieCollector(Collector):
    def __init__(self, storage: Any) -> None:
        self._storage = storage

    def collect(self) -> Iterator[Metric]:
        st = self._storage
        state = getattr(getattr(st, "state", None), "value", "")
        yield GaugeMetricFamily(
            "bookie_SERVER_STATUS", "1 writable, 0 read-only", 1.0 if state == "writable" else 0.0
        )
        journal = getattr(st, "journal", None)
        for name, lat in (
            ("bookie_journal_JOURNAL_ADD_ENTRY", getattr(journal, "add_latency", None)),
            ("bookie_journal_JOURNAL_SYNC", getattr(journal, "sync_latency", None)),
            ("bookkeeper_server_ADD_ENTRY_REQUEST", getattr(st, "add_latency", None)),
        ):
            if lat is None:
                continue
            yield from _summary(name, lat)


def _summary(name: str, lat: LatencyBuckets) -> Iterator[Metric]:
    fam = SummaryMetricFamily(name, f"{name} latency (ms)", labels=["success"])
    fam.add_metric(["true"], count_value=lat.count, sum_value=lat.sum_ms)
    yield fam
    buckets = GaugeMetricFamily(f"{name}_buckets", f"{name}: adds per latency range (ms)", labels=["le"])
    for suffix, c in zip((*WRITE_LATENCY_SUFFIXES, "overflow"), lat.counts, strict=True):
        buckets.add_metric([suffix.removeprefix("le_")], c)
    yield buckets


def install_process_metrics(registry: CollectorRegistry, service: Any) -> None:
    """process_* always; the event-loop lag sampler when a loop and a supervisor are there."""
    ProcessCollector(registry=registry)
    clock = getattr(service, "clock", None)
    supervisor = getattr(service, "supervisor", None)
    if clock is None or supervisor is None:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # built outside a loop (unit tests): no sampler
    lag = EventLoopLag(clock)
    registry.register(lag)
    supervisor.spawn(lag.run(), name="event-loop-lag")


def register_bookie_metrics(app: Any, storage: Any) -> None:
    registry: CollectorRegistry | None = getattr(app.state, "metrics_registry", None)
    if registry is not None and storage is not None:
        registry.register(BookieCollector(storage))
