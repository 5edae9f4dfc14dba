"""``magnetar admin`` through ``magnetar.cli.main.main([...])`` against an in-process fake REST API.

The transport is injected with the CLI's hidden hook (env MAGNETAR_ADMIN_TRANSPORT naming
``fake_admin_rest:CURRENT``), never a global of production code.  End-to-end runs
against a real standalone belong to the integration tests (once the server exists).
"""

from __future__ import annotations

import argparse
import json
from urllib.parse import parse_qsl

import fake_admin_rest
import pytest

from magnetar.cli.main import build_parser, main

NO_BODY = object()


@pytest.fixture
def fake(monkeypatch):
    server = fake_admin_rest.FakeAdminRest()
    monkeypatch.setattr(fake_admin_rest, "CURRENT", server.transport())
    monkeypatch.setenv("MAGNETAR_ADMIN_TRANSPORT", "fake_admin_rest:CURRENT")
    monkeypatch.delenv("MAGNETAR_ADMIN_URL", raising=False)
    monkeypatch.delenv("PULSAR_CLIENT_CONF", raising=False)
    return server


def admin(*argv: str) -> int:
    return main(["admin", *argv])


def test_full_flow_tenant_namespace_policies_topic_stats_delete(fake, capsys):
    assert (
        admin("tenants", "create", "my-tenant", "--admin-roles", "r1", "--allowed-clusters", "standalone")
        == 0
    )
    assert fake.body() == {"adminRoles": ["r1"], "allowedClusters": ["standalone"]}
    assert admin("tenants", "list") == 0
    assert capsys.readouterr().out.split() == ["my-tenant"]
    assert admin("namespaces", "create", "my-tenant/ns1", "-b", "8") == 0
    assert fake.body() == {"bundles": {"numBundles": 8}}
    assert admin("namespaces", "set-retention", "my-tenant/ns1", "--size", "10M", "--time", "1h") == 0
    req = fake.last()
    assert (req.method, req.url.path) == ("POST", "/admin/v2/namespaces/my-tenant/ns1/retention")
    assert fake.body() == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert admin("namespaces", "get-retention", "my-tenant/ns1") == 0
    assert json.loads(capsys.readouterr().out) == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert admin("namespaces", "get-message-ttl", "my-tenant/ns1") == 0
    assert capsys.readouterr().out == ""  # unset (204) prints nothing
    assert admin("topics", "create-partitioned-topic", "persistent://my-tenant/ns1/x", "-p", "4") == 0
    assert fake.body() == 4
    assert admin("topics", "list", "my-tenant/ns1") == 0
    out = capsys.readouterr().out.split()
    assert out == [f"persistent://my-tenant/ns1/x-partition-{i}" for i in range(4)]
    assert (
        admin("topics", "create-subscription", "persistent://my-tenant/ns1/x", "-s", "sub1", "-m", "earliest")
        == 0
    )
    assert fake.body()["ledgerId"] == -1
    assert admin("topics", "partitioned-stats", "persistent://my-tenant/ns1/x") == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["metadata"] == {"partitions": 4} and "sub1" in stats["subscriptions"]
    assert admin("topics", "delete-partitioned-topic", "persistent://my-tenant/ns1/x") == 0
    assert admin("namespaces", "delete", "my-tenant/ns1") == 0
    assert admin("tenants", "delete", "my-tenant") == 0
    assert fake.tenants == {} and fake.namespaces == {} and fake.topics == {}


def test_http_error_prints_reason_and_exits_1(fake, capsys):
    assert admin("tenants", "get", "nope") == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "HTTP 404 Not Found"
    assert "Reason: Tenant does not exist" in err
    admin("tenants", "create", "t", "-c", "standalone")
    assert admin("tenants", "create", "t", "-c", "standalone") == 1
    assert "Reason: Tenant already exist" in capsys.readouterr().err


def test_create_tenant_defaults_to_all_clusters(fake):
    assert admin("tenants", "create", "t") == 0
    assert fake.body() == {"adminRoles": [], "allowedClusters": ["standalone"]}


def test_bad_arguments_fail_cleanly(fake, capsys):
    with pytest.raises(SystemExit) as info:
        admin("namespaces", "set-retention", "t/ns", "--size", "10Q", "--time", "1h")
    assert info.value.code == 2
    assert "invalid size" in capsys.readouterr().err
    assert admin("topics", "create", "a/b") == 1  # a two-part name is not a topic
    assert "invalid short topic name" in capsys.readouterr().err


T = "persistent://t/ns/x"
TP = "/admin/v2/persistent/t/ns/x"
NS = "/admin/v2/namespaces/t/ns"

# argv -> (method, path, query, body) as in the reference (section 12 and the REST tables)
CLI_CASES = [
    (
        ["clusters", "create", "c2", "--url", "http://h:8080", "--broker-url", "pulsar://h:6650"],
        "PUT",
        "/admin/v2/clusters/c2",
        {},
        {"serviceUrl": "http://h:8080", "brokerServiceUrl": "pulsar://h:6650"},
    ),
    (
        ["clusters", "update-peer-clusters", "c1", "--peer-clusters", "c2,c3"],
        "POST",
        "/admin/v2/clusters/c1/peers",
        {},
        ["c2", "c3"],
    ),
    (["namespaces", "create", "t/ns", "-c", "a,b"], "PUT", NS, {}, {"replication_clusters": ["a", "b"]}),
    (["namespaces", "set-message-ttl", "t/ns", "-ttl", "1h"], "POST", NS + "/messageTTL", {}, 3600),
    (
        ["namespaces", "set-backlog-quota", "t/ns", "-l", "1G", "-p", "producer_request_hold"],
        "POST",
        NS + "/backlogQuota",
        {"backlogQuotaType": "destination_storage"},
        {"limitSize": 1024**3, "limitTime": -1, "policy": "producer_request_hold"},
    ),
    (
        [
            "namespaces",
            "set-backlog-quota",
            "t/ns",
            "-lt",
            "2h",
            "-p",
            "producer_exception",
            "-t",
            "message_age",
        ],
        "POST",
        NS + "/backlogQuota",
        {"backlogQuotaType": "message_age"},
        {"limitSize": -1, "limitTime": 7200, "policy": "producer_exception"},
    ),
    (
        ["namespaces", "remove-backlog-quota", "t/ns", "-t", "message_age"],
        "DELETE",
        NS + "/backlogQuota",
        {"backlogQuotaType": "message_age"},
        NO_BODY,
    ),
    (["namespaces", "get-backlog-quotas", "t/ns"], "GET", NS + "/backlogQuotaMap", {}, NO_BODY),
    (
        ["namespaces", "set-persistence", "t/ns", "-e", "3", "-w", "2", "-a", "2", "-r", "0"],
        "POST",
        NS + "/persistence",
        {},
        {
            "bookkeeperEnsemble": 3,
            "bookkeeperWriteQuorum": 2,
            "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
    ),
    (["namespaces", "set-deduplication", "t/ns", "--enable"], "POST", NS + "/deduplication", {}, True),
    (
        ["namespaces", "set-schema-compatibility-strategy", "t/ns", "-c", "backward"],
        "PUT",
        NS + "/schemaCompatibilityStrategy",
        {},
        "BACKWARD",
    ),
    (
        ["namespaces", "set-auto-topic-creation", "t/ns", "-e", "-t", "partitioned", "-n", "3"],
        "POST",
        NS + "/autoTopicCreation",
        {},
        {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3},
    ),
    (
        ["namespaces", "set-max-producers-per-topic", "t/ns", "-p", "4"],
        "POST",
        NS + "/maxProducersPerTopic",
        {},
        4,
    ),
    (
        ["namespaces", "set-max-consumers-per-topic", "t/ns", "-c", "4"],
        "POST",
        NS + "/maxConsumersPerTopic",
        {},
        4,
    ),
    (
        ["namespaces", "set-max-unacked-messages-per-consumer", "t/ns", "-c", "100"],
        "POST",
        NS + "/maxUnackedMessagesPerConsumer",
        {},
        100,
    ),
    (
        ["namespaces", "set-publish-rate", "t/ns", "-m", "10", "-b", "1000"],
        "POST",
        NS + "/publishRate",
        {},
        {"publishThrottlingRateInMsg": 10, "publishThrottlingRateInByte": 1000},
    ),
    (
        ["namespaces", "set-dispatch-rate", "t/ns", "-md", "50"],
        "POST",
        NS + "/dispatchRate",
        {},
        {
            "dispatchThrottlingRateInMsg": 50,
            "dispatchThrottlingRateInByte": -1,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 1,
        },
    ),
    (
        ["namespaces", "set-subscription-types-enabled", "t/ns", "-t", "shared,Key_Shared"],
        "POST",
        NS + "/subscriptionTypesEnabled",
        {},
        ["Shared", "Key_Shared"],
    ),
    (
        [
            "namespaces",
            "set-inactive-topic-policies",
            "t/ns",
            "-e",
            "-t",
            "1h",
            "-m",
            "delete_when_no_subscriptions",
        ],
        "POST",
        NS + "/inactiveTopicPolicies",
        {},
        {
            "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
            "maxInactiveDurationSeconds": 3600,
            "deleteWhileInactive": True,
        },
    ),
    (
        ["namespaces", "set-delayed-delivery", "t/ns", "-e", "-t", "2s"],
        "POST",
        NS + "/delayedDelivery",
        {},
        {"tickTime": 2000, "active": True, "maxDeliveryDelayInMillis": 0},
    ),
    (
        ["namespaces", "set-offload-threshold", "t/ns", "-s", "10M"],
        "PUT",
        NS + "/offloadThreshold",
        {},
        10 * 1024**2,
    ),
    (
        ["namespaces", "set-offload-policies", "t/ns", "-d", "filesystem", "-t", "1G"],
        "POST",
        NS + "/offloadPolicies",
        {},
        {
            "managedLedgerOffloadDriver": "filesystem",
            "managedLedgerOffloadMaxBlockSizeInBytes": 64 * 1024**2,
            "managedLedgerOffloadReadBufferSizeInBytes": 1024**2,
            "managedLedgerOffloadThresholdInBytes": 1024**3,
            "managedLedgerOffloadThresholdInSeconds": -1,
        },
    ),
    (["namespaces", "remove-offload-policies", "t/ns"], "DELETE", NS + "/removeOffloadPolicies", {}, NO_BODY),
    (["namespaces", "set-clusters", "t/ns", "-c", "a,b"], "POST", NS + "/replication", {}, ["a", "b"]),
    (
        ["namespaces", "grant-permission", "t/ns", "--role", "app", "--actions", "produce,consume"],
        "POST",
        NS + "/permissions/app",
        {},
        ["produce", "consume"],
    ),
    (
        ["namespaces", "unload", "t/ns", "-b", "0x00000000_0x40000000"],
        "PUT",
        NS + "/0x00000000_0x40000000/unload",
        {},
        NO_BODY,
    ),
    (
        ["namespaces", "clear-offload-deletion-lag", "t/ns"],
        "DELETE",
        NS + "/offloadDeletionLagMs",
        {},
        NO_BODY,
    ),
    (["topics", "create", T], "PUT", TP, {}, NO_BODY),
    (["topics", "update-partitioned-topic", T, "-p", "8"], "POST", TP + "/partitions", {}, 8),
    (
        ["topics", "stats", T],
        "GET",
        TP + "/stats",
        {
            "getPreciseBacklog": "false",
            "subscriptionBacklogSize": "true",
            "getEarliestTimeInBacklog": "false",
        },
        NO_BODY,
    ),
    (["topics", "stats-internal", T], "GET", TP + "/internalStats", {}, NO_BODY),
    (["topics", "skip", T, "-s", "s", "-n", "3"], "POST", TP + "/subscription/s/skip/3", {}, NO_BODY),
    (["topics", "clear-backlog", T, "-s", "s"], "POST", TP + "/subscription/s/skip_all", {}, NO_BODY),
    (
        ["topics", "expire-messages", T, "-s", "s", "-t", "1m"],
        "POST",
        TP + "/subscription/s/expireMessages/60",
        {},
        NO_BODY,
    ),
    (
        ["topics", "reset-cursor", T, "-s", "s", "-m", "5:6"],
        "POST",
        TP + "/subscription/s/resetcursor",
        {},
        {"ledgerId": 5, "entryId": 6, "partitionIndex": -1, "isExcluded": False, "batchIndex": -1},
    ),
    (
        ["topics", "unsubscribe", T, "-s", "s", "-f"],
        "DELETE",
        TP + "/subscription/s",
        {"force": "true"},
        NO_BODY,
    ),
    (["topics", "last-message-id", T], "GET", TP + "/lastMessageId", {}, NO_BODY),
    (["topics", "unload", T], "PUT", TP + "/unload", {}, NO_BODY),
    (
        ["topics", "set-retention", T, "-s", "-1", "-t", "-1"],
        "POST",
        TP + "/retention",
        {},
        {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
    ),
    (["topics", "set-message-ttl", T, "-t", "30"], "POST", TP + "/messageTTL", {"messageTTL": "30"}, NO_BODY),
    (
        ["topics", "set-max-unacked-messages-on-consumer", T, "-m", "7"],
        "POST",
        TP + "/maxUnackedMessagesOnConsumer",
        {},
        7,
    ),
    (
        ["topicPolicies", "set-max-producers", T, "-p", "2", "-g"],
        "POST",
        TP + "/maxProducers",
        {"isGlobal": "true"},
        2,
    ),
    (
        ["topic-policies", "get-retention", T, "--applied"],
        "GET",
        TP + "/retention",
        {"applied": "true"},
        NO_BODY,
    ),
    (["topicPolicies", "remove-deduplication", T], "DELETE", TP + "/deduplicationEnabled", {}, NO_BODY),
    (["brokers", "list", "standalone"], "GET", "/admin/v2/brokers/standalone", {}, NO_BODY),
    (
        ["brokers", "update-dynamic-config", "--config", "maxUnackedMessagesPerConsumer", "--value", "10"],
        "POST",
        "/admin/v2/brokers/configuration/maxUnackedMessagesPerConsumer/10",
        {},
        NO_BODY,
    ),
    (["brokers", "healthcheck"], "GET", "/admin/v2/brokers/health", {}, NO_BODY),
    (["bookies", "list-bookies"], "GET", "/admin/v2/bookies/all", {}, NO_BODY),
    (["schemas", "get", T, "-v", "2"], "GET", "/admin/v2/schemas/t/ns/x/schema/2", {}, NO_BODY),
]


@pytest.mark.parametrize(
    ("argv", "method", "path", "query", "body"),
    CLI_CASES,
    ids=[" ".join(c[0][:2]) + f"#{i}" for i, c in enumerate(CLI_CASES)],
)
def test_cli_sends_reference_request(fake, argv, method, path, query, body):
    admin(*argv)  # the fake may answer 404 for unknown state; the request is what we check
    req = fake.requests[-1]
    assert req.method == method
    assert req.url.raw_path.decode().split("?")[0] == path
    assert dict(parse_qsl(req.url.query.decode())) == query
    if body is NO_BODY:
        assert req.content == b""
    else:
        assert json.loads(req.content) == body


def test_list_merges_persistent_and_non_persistent(fake):
    fake.tenants["t"] = {}
    fake.namespaces["t/ns"] = {"policies": {}}
    assert admin("topics", "list", "t/ns") == 0
    assert [r.url.path for r in fake.requests] == [
        "/admin/v2/persistent/t/ns",
        "/admin/v2/non-persistent/t/ns",
    ]


def test_output_json_and_table(fake, capsys):
    admin("tenants", "create", "t1", "-c", "standalone", "-r", "a,b")
    capsys.readouterr()
    assert admin("-o", "json", "tenants", "list") == 0
    assert json.loads(capsys.readouterr().out) == ["t1"]
    assert admin("--output", "table", "tenants", "get", "t1") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["KEY", "VALUE"]
    assert ["adminRoles", "a,b"] in [line.split() for line in out]


def test_admin_url_from_flag_env_and_client_conf(fake, monkeypatch, tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text(
        "webServiceUrl=http://from-conf:8080/\nauthPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
        "authParams=token:conf-token\n"
    )
    admin("--config", str(conf), "clusters", "list")
    req = fake.last()
    assert req.url.host == "from-conf" and req.headers["authorization"] == "Bearer conf-token"
    monkeypatch.setenv("MAGNETAR_ADMIN_URL", "http://from-env:8081")
    admin("--config", str(conf), "clusters", "list")
    assert fake.last().url.host == "from-env"
    admin(
        "--admin-url",
        "http://from-flag:9090",
        "--auth-plugin",
        "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
        "--auth-params",
        '{"userId":"u","password":"p"}',
        "clusters",
        "list",
    )
    req = fake.last()
    assert (req.url.host, req.url.port) == ("from-flag", 9090)
    assert req.headers["authorization"].startswith("Basic ")


def test_terminate_and_compaction_messages(fake, capsys):
    import httpx

    fake.canned[("POST", TP + "/terminate")] = httpx.Response(
        200, json={"ledgerId": 3, "entryId": 9, "partitionIndex": -1}
    )
    fake.canned[("GET", TP + "/compaction")] = httpx.Response(
        200, json={"status": "SUCCESS", "lastError": ""}
    )
    assert admin("topics", "terminate", T) == 0
    assert capsys.readouterr().out.strip() == "Topic successfully terminated at 3:9:-1"
    assert admin("topics", "compact", T) == 0
    assert capsys.readouterr().out.strip() == f"Topic compaction requested for {T}"
    assert admin("topics", "compaction-status", T) == 0
    assert capsys.readouterr().out.strip() == "Compaction was a success"


def test_peek_prints_id_times_properties_and_hex(fake, capsys):
    import httpx

    fake.canned[("GET", TP + "/subscription/s/position/1")] = httpx.Response(
        200,
        content=b"hello",
        headers={
            "X-Pulsar-Message-ID": "1:2",
            "X-Pulsar-publish-time": "2024-03-01T12:00:00Z",
            "X-Pulsar-PROPERTY": '{"k":"v"}',
        },
    )
    assert admin("topics", "peek-messages", T, "-s", "s") == 0
    out = capsys.readouterr().out
    assert "Message ID: 1:2" in out and "Publish time: 1709294400000" in out
    assert "k    v" in out and "|00000000| 68 65 6c 6c 6f" in out and "|hello" in out


def test_offload_picks_first_ledger_to_keep():
    from magnetar.cli.admin.topics import first_ledger_to_keep

    stats = {
        "ledgers": [{"ledgerId": 1, "size": 100}, {"ledgerId": 2, "size": 100}, {"ledgerId": 3, "size": 0}],
        "currentLedgerSize": 50,
    }
    # newest first: ledger 3 (50 bytes) fits, 3+2 (150) does not: keep only ledger 3
    assert str(first_ledger_to_keep(stats, 120)) == "3:0:-1"
    assert str(first_ledger_to_keep(stats, 200)) == "2:0:-1"
    assert first_ledger_to_keep(stats, 1000) is None


def _walk(parser: argparse.ArgumentParser, path: list[str]):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                assert helps.get(name), f"{' '.join(path + [name])} has no help text"
                yield from _walk(sub, path + [name])


def test_every_admin_command_has_help_text(capsys):
    admin_parser = build_parser()._subparsers._group_actions[0].choices["admin"]
    admin_parser._subparsers._group_actions[0].load_all()  # groups are built lazily
    count = 0
    for path, parser in _walk(admin_parser, ["admin"]):
        count += 1
        assert parser.description, f"{' '.join(path)} has no description"
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                assert action.help, f"{' '.join(path)} {action.option_strings or action.dest} has no help"
        assert len(parser.format_help()) > 50
    assert count > 300  # groups and leaf commands
    for path in (
        ["admin"],
        ["admin", "namespaces"],
        ["admin", "topics", "peek-messages"],
        ["admin", "topicPolicies", "set-retention"],
    ):
        with pytest.raises(SystemExit) as info:
            main([*path, "--help"])
        assert info.value.code == 0
        assert "usage: magnetar " + " ".join(path) in capsys.readouterr().out


def test_connection_failure_prints_error_connecting_to(fake, monkeypatch, capsys):
    import httpx

    def refuse(request):
        raise httpx.ConnectError("Connection refused", request=request)

    monkeypatch.setattr(fake_admin_rest, "CURRENT", httpx.MockTransport(refuse))
    assert admin("--admin-url", "http://down:8080", "tenants", "list") == 1
    err = capsys.readouterr().err
    assert "Connection refused" in err and err.strip().endswith("Error connecting to: http://down:8080")


def test_invalid_policy_values_are_refused_before_sending(fake, capsys):
    assert admin("namespaces", "set-persistence", "t/ns", "-e", "1", "-w", "2", "-a", "1", "-r", "0") == 1
    assert "ensemble >= write quorum" in capsys.readouterr().err
    assert admin("namespaces", "set-auto-topic-creation", "t/ns", "-e", "-t", "partitioned") == 1
    assert admin("topics", "reset-cursor", T, "-s", "s") == 1  # neither --time nor --messageId
    assert fake.requests == []


def test_reset_cursor_by_relative_time_sends_epoch_ms(fake):
    import time

    before_ms = int(time.time() * 1000)
    assert admin("topics", "reset-cursor", T, "-s", "s", "-t", "10m") == 0
    path = fake.last().url.path
    assert path.startswith(TP + "/subscription/s/resetcursor/")
    ts = int(path.rsplit("/", 1)[1])
    assert before_ms - 600_000 - 5_000 <= ts <= int(time.time() * 1000) - 600_000


def test_peek_n_calls_each_position_and_lookup_prints_broker_url(fake, capsys):
    import httpx

    for i in (1, 2):
        fake.canned[("GET", TP + f"/subscription/s/position/{i}")] = httpx.Response(
            200, content=f"m{i}".encode(), headers={"X-Pulsar-Message-ID": f"1:{i}"}
        )
    fake.canned[("GET", "/lookup/v2/topic/persistent/t/ns/x")] = httpx.Response(
        200, json={"brokerUrl": "pulsar://h:6650", "httpUrl": "http://h:8080"}
    )
    assert admin("topics", "peek-messages", T, "-s", "s", "-n", "2") == 0
    assert [r.url.path for r in fake.requests] == [
        TP + "/subscription/s/position/1",
        TP + "/subscription/s/position/2",
    ]
    out = capsys.readouterr().out
    assert "Message ID: 1:1" in out and "Message ID: 1:2" in out and "-" * 73 in out
    assert admin("topics", "lookup", T) == 0
    assert capsys.readouterr().out.strip() == "pulsar://h:6650"


def test_partitioned_lookup_and_autoupdate_strategy(fake, capsys):
    import httpx

    fake.canned[("GET", TP + "/partitions")] = httpx.Response(200, json={"partitions": 2})
    for i in (0, 1):
        fake.canned[("GET", f"/lookup/v2/topic/persistent/t/ns/x-partition-{i}")] = httpx.Response(
            200, json={"brokerUrl": f"pulsar://b{i}:6650"}
        )
    assert admin("topics", "partitioned-lookup", T) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{T}-partition-0    pulsar://b0:6650",
        f"{T}-partition-1    pulsar://b1:6650",
    ]
    fake.tenants["t"] = {}
    fake.namespaces["t/ns"] = {"policies": {}}
    assert admin("namespaces", "set-schema-autoupdate-strategy", "t/ns", "-d") == 0
    req = fake.last()
    assert (req.method, req.url.path) == ("PUT", NS + "/schemaAutoUpdateCompatibilityStrategy")
    assert fake.body() == "AutoUpdateDisabled"
    assert admin("non-persistent", "stats", "non-persistent://t/ns/np") in (0, 1)
    assert fake.last().url.path == "/admin/v2/non-persistent/t/ns/np/stats"


def test_ns_isolation_policy_set(fake):
    argv = [
        "ns-isolation-policy",
        "set",
        "c1",
        "p1",
        "--namespaces",
        "t/ns.*",
        "--primary",
        "b1.*",
        "--auto-failover-policy-params",
        "min_limit=1,usage_threshold=80",
    ]
    admin(*argv)
    req = fake.last()
    assert (req.method, req.url.path) == ("POST", "/admin/v2/clusters/c1/namespaceIsolationPolicies/p1")
    assert fake.body() == {
        "namespaces": ["t/ns.*"],
        "primary": ["b1.*"],
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "80"},
        },
    }
