# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Load-management admin on a real standalone, through ``magnetar admin`` (in-process, magnetar.testing.cli):
``broker-stats load-report``/``topics``/``allocator-stats``, ``namespaces split-bundle`` with
``topic_count_equally_divide``, and the ``loadBalancer*`` keys as dynamic configuration."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from subprocess import CompletedProcess

import pulsar

from magnetar.broker.ownership.bundles import topic_hash
from magnetar.testing.cli import run_admin
from tests.integration.test_admin_support import standalone  # noqa: F401

CLI_TIMEOUT_S = 60


def admin(standalone, *args: str, check: bool = True) -> CompletedProcess:  # type: ignore[no-untyped-def]
    return run_admin(standalone.web_url, *args, check=check)  # in-process: magnetar.testing.cli


def js(standalone, *args: str):  # type: ignore[no-untyped-def]
    return json.loads(admin(standalone, "-o", "json", *args).stdout)


def rest(standalone, method: str, path: str, body: object = None) -> tuple[int, object]:  # type: ignore[no-untyped-def]
    """The same admin API without a CLI process (most checks; the CLI is exercised once per command)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        standalone.web_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=CLI_TIMEOUT_S) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_load_report_topics_and_allocator_stats(standalone) -> None:  # type: ignore[no-untyped-def]
    assert (
        rest(standalone, "PUT", "/admin/v2/namespaces/public/lbstats", {"bundles": {"numBundles": 4}})[0]
        == 204
    )
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer("persistent://public/lbstats/a", batching_enabled=False)
        consumer = client.subscribe("persistent://public/lbstats/a", "s")
        for i in range(20):
            producer.send(b"m-%d" % i)
        for _ in range(20):
            consumer.acknowledge(consumer.receive(10_000))
        rest(standalone, "GET", "/admin/v2/broker-stats/load-report")  # starts the rate window
        time.sleep(1.0)
        for i in range(20):
            producer.send(b"n-%d" % i)
        report = js(standalone, "broker-stats", "load-report")
        for key in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"):
            assert set(report[key]) == {"usage", "limit"}, report[key]
        assert report["msgRateIn"] > 0 and report["msgThroughputIn"] > 0, report
        assert report["numTopics"] >= 1 and report["numProducers"] >= 1 and report["numConsumers"] >= 1
        bundle = next(b for b in report["bundles"] if b.startswith("public/lbstats/"))
        assert report["lastStats"][bundle]["topics"] == 1
        topics = rest(standalone, "GET", "/admin/v2/broker-stats/topics")[1]
        (rng,) = topics["public/lbstats"]
        assert f"public/lbstats/{rng}" == bundle
        stats = topics["public/lbstats"][rng]["persistent"]["persistent://public/lbstats/a"]
        assert stats["msgInCounter"] >= 40
    finally:
        client.close()
    alloc = js(standalone, "broker-stats", "allocator-stats", "default")
    assert alloc["usedHeapMemory"] > 0 and "numDirectArenas" in alloc
    bad = admin(standalone, "broker-stats", "allocator-stats", "nope", check=False)
    assert bad.returncode != 0 and "Allocator name is not valid" in bad.stderr + bad.stdout
    status, decisions = rest(standalone, "GET", "/admin/v2/broker-stats/load-decisions")
    assert status == 200 and decisions["loadManager"] == "none"  # a standalone has no load manager


def test_split_bundle_topic_count_equally_divide(standalone) -> None:  # type: ignore[no-untyped-def]
    assert (
        rest(standalone, "PUT", "/admin/v2/namespaces/public/lbsplit", {"bundles": {"numBundles": 1}})[0]
        == 204
    )
    names = [f"persistent://public/lbsplit/t{i}" for i in range(10)]
    for t in names:
        assert rest(standalone, "PUT", "/admin/v2/persistent/" + t.split("://")[1])[0] == 204
    admin(
        standalone, "namespaces", "split-bundle", "public/lbsplit",
        "-b", "0x00000000_0xffffffff", "-san", "topic_count_equally_divide",
    )  # fmt: skip
    after = rest(standalone, "GET", "/admin/v2/namespaces/public/lbsplit/bundles")[1]["boundaries"]
    bounds = [int(b, 16) for b in after]
    assert len(bounds) == 3
    low = sum(topic_hash(t) < bounds[1] for t in names)
    assert low == 5, (bounds, sorted(topic_hash(t) for t in names))  # half the topics each side
    bad = admin(
        standalone, "namespaces", "split-bundle", "public/lbsplit",
        "-b", f"0x{bounds[0]:08x}_0x{bounds[1]:08x}", "-san", "no_such_divide", check=False,
    )  # fmt: skip
    assert bad.returncode != 0


def test_load_balancer_keys_are_dynamic_config(standalone) -> None:  # type: ignore[no-untyped-def]
    names = rest(standalone, "GET", "/admin/v2/brokers/configuration")[1]
    assert "loadBalancerSheddingEnabled" in names and "loadBalancerBrokerThresholdShedderPercentage" in names
    admin(
        standalone,
        "brokers",
        "update-dynamic-config",
        "--config",
        "loadBalancerSheddingEnabled",
        "--value",
        "false",
    )
    values = rest(standalone, "GET", "/admin/v2/brokers/configuration/values")[1]
    assert values["loadBalancerSheddingEnabled"] == "false"
    status, body = rest(
        standalone, "POST", "/admin/v2/brokers/configuration/loadBalancerSheddingIntervalMinutes/soon"
    )
    assert status == 412 and "loadBalancerSheddingIntervalMinutes" in str(body)
    assert rest(standalone, "DELETE", "/admin/v2/brokers/configuration/loadBalancerSheddingEnabled")[0] == 204
    runtime = rest(standalone, "GET", "/admin/v2/brokers/configuration/runtime")[1]
    assert "loadBalancerSheddingEnabled" not in runtime or runtime["loadBalancerSheddingEnabled"] != "None"
