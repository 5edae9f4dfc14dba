# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""``magnetar admin`` end to end against a real standalone, with the official client producing.

create tenant -> namespace -> policies -> partitioned topic -> produce -> stats shows it -> delete.
Each test's first command runs as a real ``python -m magnetar.cli.main admin ...`` subprocess
(the entry point as a user runs it); the rest call the same ``main(argv)`` in-process
(magnetar.testing.cli: the same parser and admin client over real HTTP, without 1-2 s of
interpreter start each).
"""

from __future__ import annotations

import json
from subprocess import CompletedProcess

import pulsar

from magnetar.testing.cli import run_admin
from tests.integration.test_admin_support import standalone  # noqa: F401


def admin(standalone, *args: str, check: bool = True, subprocess: bool = False) -> CompletedProcess:  # type: ignore[no-untyped-def]
    return run_admin(standalone.web_url, *args, check=check, subprocess=subprocess)


def test_cli_end_to_end(standalone) -> None:  # type: ignore[no-untyped-def]
    admin(standalone, "tenants", "create", "clit", "-c", "standalone", "-r", "ops", subprocess=True)
    assert "clit" in admin(standalone, "tenants", "list").stdout.split()
    info = json.loads(admin(standalone, "-o", "json", "tenants", "get", "clit").stdout)
    assert info["allowedClusters"] == ["standalone"] and info["adminRoles"] == ["ops"]
    admin(standalone, "namespaces", "create", "clit/ns", "-b", "2")
    assert "clit/ns" in admin(standalone, "namespaces", "list", "clit").stdout
    admin(standalone, "namespaces", "set-message-ttl", "clit/ns", "-ttl", "120")
    assert admin(standalone, "namespaces", "get-message-ttl", "clit/ns").stdout.strip() == "120"
    admin(standalone, "namespaces", "set-retention", "clit/ns", "--size", "10M", "--time", "1h")
    ret = json.loads(admin(standalone, "-o", "json", "namespaces", "get-retention", "clit/ns").stdout)
    assert ret == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    admin(standalone, "topics", "create-partitioned-topic", "persistent://clit/ns/t", "-p", "2")
    meta = json.loads(
        admin(
            standalone, "-o", "json", "topics", "get-partitioned-topic-metadata", "persistent://clit/ns/t"
        ).stdout
    )
    assert meta["partitions"] == 2

    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe("persistent://clit/ns/t", "sub")
        producer = client.create_producer("persistent://clit/ns/t", batching_enabled=False)
        for i in range(12):
            producer.send(b"cli-%d" % i)
        producer.close()
        for _ in range(5):
            consumer.acknowledge(consumer.receive(5000))
        stats = json.loads(
            admin(standalone, "-o", "json", "topics", "partitioned-stats", "persistent://clit/ns/t").stdout
        )
        assert stats["msgInCounter"] == 12
        assert stats["subscriptions"]["sub"]["msgBacklog"] == 7
        consumer.close()
    finally:
        client.close()

    bad = admin(standalone, "namespaces", "delete", "clit/ns", check=False)
    assert bad.returncode == 1 and "Reason:" in bad.stdout + bad.stderr
    admin(standalone, "topics", "delete-partitioned-topic", "persistent://clit/ns/t")
    admin(standalone, "namespaces", "delete", "clit/ns")
    admin(standalone, "tenants", "delete", "clit")
    assert "clit" not in admin(standalone, "tenants", "list").stdout.split()


def test_cli_topic_cursor_and_policy_commands(standalone) -> None:  # type: ignore[no-untyped-def]
    t = "persistent://public/default/cli-ops"
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    try:
        client.subscribe(t, "s1").close()
        producer = client.create_producer(t, batching_enabled=False)
        for i in range(5):
            producer.send(b"hello-%d" % i, properties={"a": "b"})
        producer.close()
    finally:
        client.close()
    peek = admin(standalone, "topics", "peek-messages", t, "-s", "s1", "-n", "2", subprocess=True).stdout
    assert peek.count("Message ID:") == 2 and "hello-0" in peek
    admin(standalone, "topics", "create-subscription", t, "-s", "s2", "-m", "earliest")
    assert admin(standalone, "topics", "subscriptions", t).stdout.split() == ["s1", "s2"]
    admin(standalone, "topics", "skip", t, "-s", "s1", "-n", "2")
    admin(standalone, "topics", "clear-backlog", t, "-s", "s2")
    stats = json.loads(admin(standalone, "-o", "json", "topics", "stats", t).stdout)
    assert stats["subscriptions"]["s1"]["msgBacklog"] == 3 and stats["subscriptions"]["s2"]["msgBacklog"] == 0
    admin(standalone, "topics", "reset-cursor", t, "-s", "s2", "-t", "10m")
    stats = json.loads(admin(standalone, "-o", "json", "topics", "stats", t).stdout)
    assert stats["subscriptions"]["s2"]["msgBacklog"] == 5
    admin(standalone, "topics", "expire-messages-all-subscriptions", t, "-t", "0")
    stats = json.loads(admin(standalone, "-o", "json", "topics", "stats", t).stdout)
    assert stats["subscriptions"]["s1"]["msgBacklog"] == 0 and stats["subscriptions"]["s2"]["msgBacklog"] == 0
    admin(standalone, "topicPolicies", "set-message-ttl", t, "-t", "30")
    assert admin(standalone, "topicPolicies", "get-message-ttl", t).stdout.strip() == "30"
    admin(standalone, "namespaces", "set-persistence", "public/default", "-e", "1", "-w", "1", "-a", "1")
    pers = json.loads(
        admin(standalone, "-o", "json", "namespaces", "get-persistence", "public/default").stdout
    )
    assert pers["bookkeeperEnsemble"] == 1
    admin(standalone, "namespaces", "remove-persistence", "public/default")
    admin(
        standalone,
        "brokers",
        "update-dynamic-config",
        "--config",
        "maxUnackedMessagesPerConsumer",
        "--value",
        "77",
    )
    assert "77" in admin(standalone, "brokers", "get-all-dynamic-config").stdout
    admin(standalone, "brokers", "delete-dynamic-config", "--config", "maxUnackedMessagesPerConsumer")
    assert "ok" in admin(standalone, "brokers", "healthcheck").stdout
    assert "terminated" in admin(standalone, "topics", "terminate", t).stdout
    admin(standalone, "topics", "delete", t, "-f")
