"""A real Prometheus server scrapes a real standalone's ``/metrics`` while the official client
produces and consumes; the assertions go through Prometheus's query API."""

from __future__ import annotations

import uuid

import pulsar
import pytest

from magnetar.testing.prometheus import PrometheusServer, require_prometheus, values
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

N = 200


@pytest.fixture(scope="module")
def metrics_standalone(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("prom")
    conf = base / "standalone.conf"
    conf.write_text("statsUpdateFrequencyInSecs=1\n")  # rates move within the test
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def prometheus(metrics_standalone, tmp_path_factory):
    binary = require_prometheus()
    target = metrics_standalone.web_url.removeprefix("http://")
    server = PrometheusServer(binary, [target], str(tmp_path_factory.mktemp("prometheus")))
    server.start()
    try:
        server.wait_for('up{job="magnetar"}', lambda r: values(r) == [1.0])
        yield server
    finally:
        server.stop()


def one(prom: PrometheusServer, expr: str) -> float:
    result = prom.query(expr)
    assert len(result) == 1, f"{expr}: {result}"
    return values(result)[0]


def test_series_exist_and_move_under_load(metrics_standalone, prometheus) -> None:
    prom = prometheus
    topic = f"persistent://public/default/prom-{uuid.uuid4().hex[:8]}"
    sel = f'topic="{topic}"'
    before_publish = one(prom, "pulsar_broker_publish_latency_count")
    before_journal = one(prom, "bookie_journal_JOURNAL_ADD_ENTRY_count")
    before_lookups = one(prom, "pulsar_broker_lookup_answers")
    client = pulsar.Client(metrics_standalone.broker_url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, "prom-sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(N):
            producer.send_async(f"m{i}".encode() * 10, None)
        producer.flush()
        for _ in range(N // 2):
            consumer.acknowledge(consumer.receive(timeout_millis=10_000))
        # Topic-level series with Pulsar's labels.
        r = prom.wait_for(f"pulsar_in_messages_total{{{sel}}}", lambda r: values(r) == [float(N)])
        assert r[0]["metric"]["cluster"] == "standalone"
        assert r[0]["metric"]["namespace"] == "public/default"
        prom.wait_for(f"pulsar_rate_in{{{sel}}}", lambda r: bool(r) and values(r)[0] > 0)
        prom.wait_for(f"pulsar_throughput_in{{{sel}}}", lambda r: bool(r) and values(r)[0] > 0)
        prom.wait_for(f"pulsar_rate_out{{{sel}}}", lambda r: bool(r) and values(r)[0] > 0)
        prom.wait_for(f"pulsar_producers_count{{{sel}}}", lambda r: values(r) == [1.0])
        prom.wait_for(f"pulsar_consumers_count{{{sel}}}", lambda r: values(r) == [1.0])
        prom.wait_for(f"pulsar_storage_size{{{sel}}}", lambda r: bool(r) and values(r)[0] > N * 20)
        prom.wait_for(f"pulsar_msg_backlog{{{sel}}}", lambda r: values(r) == [float(N // 2)])
        sub = f'{sel},subscription="prom-sub"'
        prom.wait_for(f"pulsar_subscription_back_log{{{sub}}}", lambda r: values(r) == [float(N // 2)])
        prom.wait_for(f"pulsar_out_messages_total{{{sub}}}", lambda r: bool(r) and values(r)[0] >= N)
        # Unacked: delivered to the consumer's queue but not acknowledged.
        prom.wait_for(
            f"pulsar_subscription_unacked_messages{{{sub}}}", lambda r: bool(r) and values(r)[0] > 0
        )
        # Storage write latency: Pulsar's non-cumulative _le_* buckets add up to _count.
        count = prom.wait_for(
            f"pulsar_storage_write_latency_count{{{sel}}}", lambda r: values(r) == [float(N)]
        )
        buckets = prom.query(f'sum({{__name__=~"pulsar_storage_write_latency_(le_.*|overflow)",{sel}}})')
        assert values(buckets) == values(count)
        assert one(prom, f"pulsar_storage_write_latency_sum{{{sel}}}") > 0
        ledger = prom.query(f"pulsar_storage_ledger_write_latency_count{{{sel}}}")
        assert values(ledger) == [float(N)]
        # Entry sizes: every entry here is under 128 bytes; the buckets add up to _count.
        prom.wait_for(f"pulsar_entry_size_count{{{sel}}}", lambda r: values(r) == [float(N)])
        assert one(prom, f"pulsar_entry_size_le_128{{{sel}}}") == N
        sizes = prom.query(f'sum({{__name__=~"pulsar_entry_size_le_.*",{sel}}})')
        assert values(sizes) == [float(N)]
        assert 0 < one(prom, f"pulsar_entry_size_sum{{{sel}}}") <= N * 128
        # Storage rates (entries/s between scrapes) rose while the load ran.
        for name in ("pulsar_storage_write_rate", "pulsar_storage_read_rate"):
            prom.wait_for(f"max_over_time({name}{{{sel}}}[5m])", lambda r: bool(r) and values(r)[0] > 0)
            prom.wait_for(f"max_over_time(pulsar_broker_{name.removeprefix('pulsar_')}[5m])",
                          lambda r: bool(r) and values(r)[0] > 0)  # fmt: skip
        # Offload series are there (nothing offloaded: no offloader configured).
        assert one(prom, f"pulsar_storage_offloaded_size{{{sel}}}") == 0
        assert one(prom, f"brk_ledgeroffloader_offload_error{{{sel}}}") == 0
        assert one(prom, f"brk_ledgeroffloader_offload_rate{{{sel}}}") == 0
        # Broker-wide: publish latency histogram, lookups, connections, bookie, ML cache, process.
        prom.wait_for("pulsar_broker_publish_latency_count", lambda r: values(r)[0] >= before_publish + N)
        assert one(prom, 'pulsar_broker_publish_latency_bucket{le="+Inf"}') >= N
        prom.wait_for("bookie_journal_JOURNAL_ADD_ENTRY_count", lambda r: values(r)[0] >= before_journal + N)
        assert one(prom, "bookie_journal_JOURNAL_SYNC_count") > 0
        assert one(prom, "bookkeeper_server_ADD_ENTRY_REQUEST_count") >= N
        prom.wait_for("pulsar_broker_lookup_answers", lambda r: values(r)[0] > before_lookups)
        prom.wait_for("pulsar_active_connections", lambda r: values(r)[0] >= 1)
        prom.wait_for("pulsar_ml_cache_hits_total + pulsar_ml_cache_misses_total", lambda r: values(r)[0] > 0)
        assert one(prom, "pulsar_broker_topics_count") >= 1
        assert one(prom, 'process_resident_memory_bytes{job="magnetar"}') > 10_000_000
        assert one(prom, 'process_open_fds{job="magnetar"}') > 5
        assert one(prom, 'process_cpu_seconds_total{job="magnetar"}') > 0
        assert one(prom, "pulsar_event_loop_lag_seconds") >= 0
        producer.close()
        consumer.close()
    finally:
        client.close()
    # Connections close: the gauge comes back down and the closed counter moves.
    prom.wait_for("pulsar_connection_closed_total_count", lambda r: values(r)[0] >= 1)
