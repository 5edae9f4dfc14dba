"""Table-driven: each admin-client method sends the method, path, query and body of the reference.

Every row is (call on the client, expected method, expected path, expected
query, expected JSON body) as listed in shared/reference/pulsar-admin-rest.md;
the fake server is an httpx.MockTransport that records the request.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest

from magnetar.admin_client import (
    EARLIEST,
    AsyncPulsarAdmin,
    AutoTopicCreationOverride,
    BacklogQuota,
    BacklogQuotaPolicy,
    ClusterData,
    DelayedDeliveryPolicies,
    DispatchRate,
    InactiveTopicPolicies,
    MessageId,
    PersistencePolicies,
    PublishRate,
    PulsarAdmin,
    RetentionPolicies,
    SubscribeRate,
    TenantInfo,
)
from magnetar.admin_client.schemas import schema_payload

NO_BODY = object()


class Recorder:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(204)


def _admin() -> tuple[PulsarAdmin, Recorder]:
    rec = Recorder()
    return PulsarAdmin("http://broker:8080", transport=httpx.MockTransport(rec)), rec


T = "persistent://t/ns/my-topic"
TP = "/admin/v2/persistent/t/ns/my-topic"
NS = "/admin/v2/namespaces/t/ns"

# (id, call, method, path, query, body)
CASES: list[tuple[str, Any, str, str, dict[str, str], Any]] = [
    # clusters
    ("clusters.list", lambda a: a.clusters.list(), "GET", "/admin/v2/clusters", {}, NO_BODY),
    (
        "clusters.get",
        lambda a: a.clusters.get("standalone"),
        "GET",
        "/admin/v2/clusters/standalone",
        {},
        NO_BODY,
    ),
    (
        "clusters.create",
        lambda a: a.clusters.create(
            "c1", ClusterData(service_url="http://h:8080", broker_service_url="pulsar://h:6650")
        ),
        "PUT",
        "/admin/v2/clusters/c1",
        {},
        {"serviceUrl": "http://h:8080", "brokerServiceUrl": "pulsar://h:6650"},
    ),
    (
        "clusters.update",
        lambda a: a.clusters.update("c1", {"serviceUrl": "http://x"}),
        "POST",
        "/admin/v2/clusters/c1",
        {},
        {"serviceUrl": "http://x"},
    ),
    ("clusters.delete", lambda a: a.clusters.delete("c1"), "DELETE", "/admin/v2/clusters/c1", {}, NO_BODY),
    (
        "clusters.peers",
        lambda a: a.clusters.update_peer_clusters("c1", ["c2", "c3"]),
        "POST",
        "/admin/v2/clusters/c1/peers",
        {},
        ["c2", "c3"],
    ),
    (
        "clusters.failure-domain",
        lambda a: a.clusters.set_failure_domain("c1", "d1", ["b1:8080"]),
        "POST",
        "/admin/v2/clusters/c1/failureDomains/d1",
        {},
        {"brokers": ["b1:8080"]},
    ),
    # tenants
    ("tenants.list", lambda a: a.tenants.list(), "GET", "/admin/v2/tenants", {}, NO_BODY),
    (
        "tenants.create",
        lambda a: a.tenants.create("t", TenantInfo(("r1",), ("standalone",))),
        "PUT",
        "/admin/v2/tenants/t",
        {},
        {"adminRoles": ["r1"], "allowedClusters": ["standalone"]},
    ),
    (
        "tenants.update",
        lambda a: a.tenants.update("t", TenantInfo((), ("c1",))),
        "POST",
        "/admin/v2/tenants/t",
        {},
        {"adminRoles": [], "allowedClusters": ["c1"]},
    ),
    (
        "tenants.delete-force",
        lambda a: a.tenants.delete("t", force=True),
        "DELETE",
        "/admin/v2/tenants/t",
        {"force": "true"},
        NO_BODY,
    ),
    # namespaces: lifecycle
    ("ns.list", lambda a: a.namespaces.list("t"), "GET", "/admin/v2/namespaces/t", {}, NO_BODY),
    (
        "ns.topics",
        lambda a: a.namespaces.get_topics("t/ns", mode="ALL"),
        "GET",
        NS + "/topics",
        {"mode": "ALL"},
        NO_BODY,
    ),
    ("ns.policies", lambda a: a.namespaces.get_policies("t/ns"), "GET", NS, {}, NO_BODY),
    ("ns.create-plain", lambda a: a.namespaces.create("t/ns"), "PUT", NS, {}, NO_BODY),
    (
        "ns.create-bundles",
        lambda a: a.namespaces.create("t/ns", bundles=8, clusters=["a", "b"]),
        "PUT",
        NS,
        {},
        {"bundles": {"numBundles": 8}, "replication_clusters": ["a", "b"]},
    ),
    (
        "ns.delete",
        lambda a: a.namespaces.delete("t/ns", force=True),
        "DELETE",
        NS,
        {"force": "true"},
        NO_BODY,
    ),
    (
        "ns.grant",
        lambda a: a.namespaces.grant_permission("t/ns", "role-1", ["produce", "consume"]),
        "POST",
        NS + "/permissions/role-1",
        {},
        ["produce", "consume"],
    ),
    (
        "ns.revoke",
        lambda a: a.namespaces.revoke_permission("t/ns", "role-1"),
        "DELETE",
        NS + "/permissions/role-1",
        {},
        NO_BODY,
    ),
    (
        "ns.sub-perm",
        lambda a: a.namespaces.grant_subscription_permission("t/ns", "s", ["r1"]),
        "POST",
        NS + "/permissions/subscription/s",
        {},
        ["r1"],
    ),
    (
        "ns.sub-revoke",
        lambda a: a.namespaces.revoke_subscription_permission("t/ns", "s", "r1"),
        "DELETE",
        NS + "/permissions/s/r1",
        {},
        NO_BODY,
    ),
    ("ns.bundles", lambda a: a.namespaces.get_bundles("t/ns"), "GET", NS + "/bundles", {}, NO_BODY),
    ("ns.unload", lambda a: a.namespaces.unload("t/ns"), "PUT", NS + "/unload", {}, NO_BODY),
    (
        "ns.unload-bundle",
        lambda a: a.namespaces.unload("t/ns", bundle="0x00000000_0x40000000"),
        "PUT",
        NS + "/0x00000000_0x40000000/unload",
        {},
        NO_BODY,
    ),
    (
        "ns.split",
        lambda a: a.namespaces.split_bundle("t/ns", "0x00000000_0xffffffff", unload=True),
        "PUT",
        NS + "/0x00000000_0xffffffff/split",
        {"unload": "true"},
        NO_BODY,
    ),
    (
        "ns.clear-backlog",
        lambda a: a.namespaces.clear_backlog("t/ns", subscription="s"),
        "POST",
        NS + "/clearBacklog/s",
        {},
        NO_BODY,
    ),
    (
        "ns.unsubscribe",
        lambda a: a.namespaces.unsubscribe("t/ns", "s"),
        "POST",
        NS + "/unsubscribe/s",
        {},
        NO_BODY,
    ),
    # namespaces: policies
    (
        "ns.retention",
        lambda a: a.namespaces.set_retention("t/ns", RetentionPolicies(60, 100)),
        "POST",
        NS + "/retention",
        {},
        {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100},
    ),
    ("ns.retention-get", lambda a: a.namespaces.get_retention("t/ns"), "GET", NS + "/retention", {}, NO_BODY),
    (
        "ns.retention-rm",
        lambda a: a.namespaces.remove_retention("t/ns"),
        "DELETE",
        NS + "/retention",
        {},
        NO_BODY,
    ),
    ("ns.ttl", lambda a: a.namespaces.set_message_ttl("t/ns", 3600), "POST", NS + "/messageTTL", {}, 3600),
    (
        "ns.backlog-map",
        lambda a: a.namespaces.get_backlog_quotas("t/ns"),
        "GET",
        NS + "/backlogQuotaMap",
        {},
        NO_BODY,
    ),
    (
        "ns.backlog-set",
        lambda a: a.namespaces.set_backlog_quota(
            "t/ns", BacklogQuota(10 * 1024**2, -1, BacklogQuotaPolicy.PRODUCER_EXCEPTION)
        ),
        "POST",
        NS + "/backlogQuota",
        {"backlogQuotaType": "destination_storage"},
        {"limitSize": 10485760, "limitTime": -1, "policy": "producer_exception"},
    ),
    (
        "ns.backlog-rm",
        lambda a: a.namespaces.remove_backlog_quota("t/ns", "message_age"),
        "DELETE",
        NS + "/backlogQuota",
        {"backlogQuotaType": "message_age"},
        NO_BODY,
    ),
    (
        "ns.dedup",
        lambda a: a.namespaces.set_deduplication("t/ns", True),
        "POST",
        NS + "/deduplication",
        {},
        True,
    ),
    (
        "ns.schema-compat",
        lambda a: a.namespaces.set_schema_compatibility_strategy("t/ns", "FULL"),
        "PUT",
        NS + "/schemaCompatibilityStrategy",
        {},
        "FULL",
    ),
    (
        "ns.auto-topic",
        lambda a: a.namespaces.set_auto_topic_creation(
            "t/ns", AutoTopicCreationOverride(True, "partitioned", 3)
        ),
        "POST",
        NS + "/autoTopicCreation",
        {},
        {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3},
    ),
    (
        "ns.persistence",
        lambda a: a.namespaces.set_persistence("t/ns", PersistencePolicies(3, 2, 2, 0.0)),
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
    (
        "ns.max-producers",
        lambda a: a.namespaces.set_max_producers("t/ns", 5),
        "POST",
        NS + "/maxProducersPerTopic",
        {},
        5,
    ),
    (
        "ns.max-consumers",
        lambda a: a.namespaces.set_max_consumers("t/ns", 5),
        "POST",
        NS + "/maxConsumersPerTopic",
        {},
        5,
    ),
    (
        "ns.max-unacked-c",
        lambda a: a.namespaces.set_max_unacked_messages_per_consumer("t/ns", 9),
        "POST",
        NS + "/maxUnackedMessagesPerConsumer",
        {},
        9,
    ),
    (
        "ns.max-unacked-s",
        lambda a: a.namespaces.remove_max_unacked_messages_per_subscription("t/ns"),
        "DELETE",
        NS + "/maxUnackedMessagesPerSubscription",
        {},
        NO_BODY,
    ),
    (
        "ns.publish-rate",
        lambda a: a.namespaces.set_publish_rate("t/ns", PublishRate(100, 1024)),
        "POST",
        NS + "/publishRate",
        {},
        {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": 1024},
    ),
    (
        "ns.dispatch-rate",
        lambda a: a.namespaces.set_dispatch_rate("t/ns", DispatchRate(10, -1, False, 1)),
        "POST",
        NS + "/dispatchRate",
        {},
        {
            "dispatchThrottlingRateInMsg": 10,
            "dispatchThrottlingRateInByte": -1,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 1,
        },
    ),
    (
        "ns.sub-dispatch-rate",
        lambda a: a.namespaces.get_subscription_dispatch_rate("t/ns"),
        "GET",
        NS + "/subscriptionDispatchRate",
        {},
        NO_BODY,
    ),
    (
        "ns.subscribe-rate",
        lambda a: a.namespaces.set_subscribe_rate("t/ns", SubscribeRate(5, 30)),
        "POST",
        NS + "/subscribeRate",
        {},
        {"subscribeThrottlingRatePerConsumer": 5, "ratePeriodInSecond": 30},
    ),
    (
        "ns.sub-types",
        lambda a: a.namespaces.set_subscription_types_enabled("t/ns", ["Shared", "Failover"]),
        "POST",
        NS + "/subscriptionTypesEnabled",
        {},
        ["Shared", "Failover"],
    ),
    (
        "ns.inactive",
        lambda a: a.namespaces.set_inactive_topic_policies(
            "t/ns", InactiveTopicPolicies(max_inactive_duration_seconds=3600)
        ),
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
        "ns.delayed",
        lambda a: a.namespaces.set_delayed_delivery("t/ns", DelayedDeliveryPolicies(1000, True)),
        "POST",
        NS + "/delayedDelivery",
        {},
        {"tickTime": 1000, "active": True, "maxDeliveryDelayInMillis": 0},
    ),
    (
        "ns.offload-threshold",
        lambda a: a.namespaces.set_offload_threshold("t/ns", 1024),
        "PUT",
        NS + "/offloadThreshold",
        {},
        1024,
    ),
    (
        "ns.offload-policies-rm",
        lambda a: a.namespaces.remove_offload_policies("t/ns"),
        "DELETE",
        NS + "/removeOffloadPolicies",
        {},
        NO_BODY,
    ),
    (
        "ns.offload-lag",
        lambda a: a.namespaces.set_offload_deletion_lag("t/ns", 3600000),
        "PUT",
        NS + "/offloadDeletionLagMs",
        {},
        3600000,
    ),
    (
        "ns.compaction",
        lambda a: a.namespaces.set_compaction_threshold("t/ns", 100),
        "PUT",
        NS + "/compactionThreshold",
        {},
        100,
    ),
    (
        "ns.replication",
        lambda a: a.namespaces.set_replication_clusters("t/ns", ["a", "b"]),
        "POST",
        NS + "/replication",
        {},
        ["a", "b"],
    ),
    (
        "ns.anti-affinity",
        lambda a: a.namespaces.set_anti_affinity_group("t/ns", "g1"),
        "POST",
        NS + "/antiAffinity",
        {},
        "g1",
    ),
    (
        "ns.properties",
        lambda a: a.namespaces.set_properties("t/ns", {"k": "v"}),
        "PUT",
        NS + "/properties",
        {},
        {"k": "v"},
    ),
    (
        "ns.resource-group",
        lambda a: a.namespaces.set_resource_group("t/ns", "rg"),
        "POST",
        NS + "/resourcegroup/rg",
        {},
        NO_BODY,
    ),
    # topics
    ("topics.list", lambda a: a.topics.list("t/ns"), "GET", "/admin/v2/persistent/t/ns", {}, NO_BODY),
    (
        "topics.list-np",
        lambda a: a.topics.list("t/ns", domain="non-persistent"),
        "GET",
        "/admin/v2/non-persistent/t/ns",
        {},
        NO_BODY,
    ),
    (
        "topics.list-partitioned",
        lambda a: a.topics.list_partitioned("t/ns"),
        "GET",
        "/admin/v2/persistent/t/ns/partitioned",
        {},
        NO_BODY,
    ),
    ("topics.create", lambda a: a.topics.create(T), "PUT", TP, {}, NO_BODY),
    (
        "topics.create-short",
        lambda a: a.topics.create("short"),
        "PUT",
        "/admin/v2/persistent/public/default/short",
        {},
        NO_BODY,
    ),
    (
        "topics.create-np",
        lambda a: a.topics.create("non-persistent://t/ns/x"),
        "PUT",
        "/admin/v2/non-persistent/t/ns/x",
        {},
        NO_BODY,
    ),
    (
        "topics.create-partitioned",
        lambda a: a.topics.create_partitioned(T, 4),
        "PUT",
        TP + "/partitions",
        {},
        4,
    ),
    (
        "topics.update-partitions",
        lambda a: a.topics.update_partitions(T, 8),
        "POST",
        TP + "/partitions",
        {},
        8,
    ),
    (
        "topics.metadata",
        lambda a: a.topics.get_partitioned_metadata(T),
        "GET",
        TP + "/partitions",
        {},
        NO_BODY,
    ),
    (
        "topics.delete-partitioned",
        lambda a: a.topics.delete_partitioned(T, force=True),
        "DELETE",
        TP + "/partitions",
        {"force": "true"},
        NO_BODY,
    ),
    ("topics.delete", lambda a: a.topics.delete(T), "DELETE", TP, {}, NO_BODY),
    (
        "topics.stats",
        lambda a: a.topics.get_stats(T),
        "GET",
        TP + "/stats",
        {
            "getPreciseBacklog": "false",
            "subscriptionBacklogSize": "true",
            "getEarliestTimeInBacklog": "false",
        },
        NO_BODY,
    ),
    (
        "topics.pstats",
        lambda a: a.topics.get_partitioned_stats(T, per_partition=True),
        "GET",
        TP + "/partitioned-stats",
        {
            "perPartition": "true",
            "getPreciseBacklog": "false",
            "subscriptionBacklogSize": "true",
            "getEarliestTimeInBacklog": "false",
        },
        NO_BODY,
    ),
    ("topics.internal", lambda a: a.topics.get_internal_stats(T), "GET", TP + "/internalStats", {}, NO_BODY),
    ("topics.subs", lambda a: a.topics.get_subscriptions(T), "GET", TP + "/subscriptions", {}, NO_BODY),
    (
        "topics.create-sub-earliest",
        lambda a: a.topics.create_subscription(T, "my sub", message_id=EARLIEST),
        "PUT",
        TP + "/subscription/my%20sub",
        {},
        {"ledgerId": -1, "entryId": -1, "partitionIndex": -1, "isExcluded": False, "batchIndex": -1},
    ),
    (
        "topics.delete-sub",
        lambda a: a.topics.delete_subscription(T, "s", force=True),
        "DELETE",
        TP + "/subscription/s",
        {"force": "true"},
        NO_BODY,
    ),
    (
        "topics.skip",
        lambda a: a.topics.skip_messages(T, "s", 5),
        "POST",
        TP + "/subscription/s/skip/5",
        {},
        NO_BODY,
    ),
    (
        "topics.clear-backlog",
        lambda a: a.topics.clear_backlog(T, "s"),
        "POST",
        TP + "/subscription/s/skip_all",
        {},
        NO_BODY,
    ),
    (
        "topics.expire",
        lambda a: a.topics.expire_messages(T, "s", 60),
        "POST",
        TP + "/subscription/s/expireMessages/60",
        {},
        NO_BODY,
    ),
    (
        "topics.expire-all",
        lambda a: a.topics.expire_messages_all_subscriptions(T, 60),
        "POST",
        TP + "/all_subscription/expireMessages/60",
        {},
        NO_BODY,
    ),
    (
        "topics.reset-time",
        lambda a: a.topics.reset_cursor(T, "s", 1700000000000),
        "POST",
        TP + "/subscription/s/resetcursor/1700000000000",
        {},
        NO_BODY,
    ),
    (
        "topics.reset-id",
        lambda a: a.topics.reset_cursor_to(T, "s", MessageId(3, 4), is_excluded=True),
        "POST",
        TP + "/subscription/s/resetcursor",
        {},
        {"ledgerId": 3, "entryId": 4, "partitionIndex": -1, "isExcluded": True, "batchIndex": -1},
    ),
    (
        "topics.peek",
        lambda a: a.topics.peek_message(T, "s", 2),
        "GET",
        TP + "/subscription/s/position/2",
        {},
        NO_BODY,
    ),
    (
        "topics.examine",
        lambda a: a.topics.examine_message(T, initial_position="earliest", message_position=3),
        "GET",
        TP + "/examinemessage",
        {"initialPosition": "earliest", "messagePosition": "3"},
        NO_BODY,
    ),
    (
        "topics.by-id",
        lambda a: a.topics.get_message_by_id(T, 7, 8),
        "GET",
        TP + "/ledger/7/entry/8",
        {},
        NO_BODY,
    ),
    ("topics.last-id", lambda a: a.topics.get_last_message_id(T), "GET", TP + "/lastMessageId", {}, NO_BODY),
    (
        "topics.terminate-partitioned",
        lambda a: a.topics.terminate_partitioned(T),
        "POST",
        TP + "/terminate/partitions",
        {},
        NO_BODY,
    ),
    ("topics.unload", lambda a: a.topics.unload(T), "PUT", TP + "/unload", {}, NO_BODY),
    ("topics.compact", lambda a: a.topics.trigger_compaction(T), "PUT", TP + "/compaction", {}, NO_BODY),
    (
        "topics.compaction-status",
        lambda a: a.topics.compaction_status(T),
        "GET",
        TP + "/compaction",
        {},
        NO_BODY,
    ),
    (
        "topics.offload",
        lambda a: a.topics.trigger_offload(T, MessageId(5, 0)),
        "PUT",
        TP + "/offload",
        {},
        {"ledgerId": 5, "entryId": 0, "partitionIndex": -1},
    ),
    (
        "topics.grant",
        lambda a: a.topics.grant_permission(T, "r", ["consume"]),
        "POST",
        TP + "/permissions/r",
        {},
        ["consume"],
    ),
    (
        "topics.lookup",
        lambda a: a.topics.lookup(T),
        "GET",
        "/lookup/v2/topic/persistent/t/ns/my-topic",
        {},
        NO_BODY,
    ),
    # topic-level policies
    (
        "tp.retention",
        lambda a: a.topic_policies.set_retention(T, RetentionPolicies(-1, -1)),
        "POST",
        TP + "/retention",
        {},
        {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
    ),
    (
        "tp.retention-applied",
        lambda a: a.topic_policies.get_retention(T, applied=True),
        "GET",
        TP + "/retention",
        {"applied": "true"},
        NO_BODY,
    ),
    (
        "tp.ttl",
        lambda a: a.topic_policies.set_message_ttl(T, 120),
        "POST",
        TP + "/messageTTL",
        {"messageTTL": "120"},
        NO_BODY,
    ),
    (
        "tp.max-unacked",
        lambda a: a.topic_policies.set_max_unacked_messages_per_consumer(T, 3),
        "POST",
        TP + "/maxUnackedMessagesOnConsumer",
        {},
        3,
    ),
    (
        "tp.max-producers-global",
        lambda a: a.topic_policies.set_max_producers(T, 2, is_global=True),
        "POST",
        TP + "/maxProducers",
        {"isGlobal": "true"},
        2,
    ),
    (
        "tp.dedup",
        lambda a: a.topic_policies.get_deduplication(T),
        "GET",
        TP + "/deduplicationEnabled",
        {},
        NO_BODY,
    ),
    (
        "tp.compaction",
        lambda a: a.topic_policies.set_compaction_threshold(T, 10),
        "POST",
        TP + "/compactionThreshold",
        {},
        10,
    ),
    (
        "tp.backlog",
        lambda a: a.topic_policies.remove_backlog_quota(T),
        "DELETE",
        TP + "/backlogQuota",
        {"backlogQuotaType": "destination_storage"},
        NO_BODY,
    ),
    (
        "tp.max-message-size",
        lambda a: a.topic_policies.set_max_message_size(T, 1024),
        "POST",
        TP + "/maxMessageSize",
        {},
        1024,
    ),
    # brokers, bookies
    ("brokers.list", lambda a: a.brokers.list(), "GET", "/admin/v2/brokers", {}, NO_BODY),
    (
        "brokers.list-cluster",
        lambda a: a.brokers.list("standalone"),
        "GET",
        "/admin/v2/brokers/standalone",
        {},
        NO_BODY,
    ),
    (
        "brokers.leader",
        lambda a: a.brokers.get_leader_broker(),
        "GET",
        "/admin/v2/brokers/leaderBroker",
        {},
        NO_BODY,
    ),
    (
        "brokers.owned",
        lambda a: a.brokers.get_owned_namespaces("standalone", "localhost:8080"),
        "GET",
        "/admin/v2/brokers/standalone/localhost%3A8080/ownedNamespaces",
        {},
        NO_BODY,
    ),
    (
        "brokers.dyn-update",
        lambda a: a.brokers.update_dynamic_configuration("maxUnackedMessagesPerConsumer", "100"),
        "POST",
        "/admin/v2/brokers/configuration/maxUnackedMessagesPerConsumer/100",
        {},
        NO_BODY,
    ),
    (
        "brokers.dyn-values",
        lambda a: a.brokers.get_all_dynamic_configurations(),
        "GET",
        "/admin/v2/brokers/configuration/values",
        {},
        NO_BODY,
    ),
    (
        "brokers.health",
        lambda a: a.brokers.health_check("V2"),
        "GET",
        "/admin/v2/brokers/health",
        {"topicVersion": "V2"},
        NO_BODY,
    ),
    ("bookies.all", lambda a: a.bookies.list_bookies(), "GET", "/admin/v2/bookies/all", {}, NO_BODY),
    (
        "bookies.rack",
        lambda a: a.bookies.set_bookie_rack("b1:3181", {"rack": "/r1", "hostname": "b1"}),
        "POST",
        "/admin/v2/bookies/racks-info/b1%3A3181",
        {"group": "default"},
        {"rack": "/r1", "hostname": "b1"},
    ),
    # schemas: partitions share the base topic's schema
    (
        "schemas.get",
        lambda a: a.schemas.get_schema(T + "-partition-2"),
        "GET",
        "/admin/v2/schemas/t/ns/my-topic/schema",
        {},
        NO_BODY,
    ),
    (
        "schemas.get-version",
        lambda a: a.schemas.get_schema(T, 3),
        "GET",
        "/admin/v2/schemas/t/ns/my-topic/schema/3",
        {},
        NO_BODY,
    ),
    (
        "schemas.post",
        lambda a: a.schemas.create_schema(T, schema_payload("string")),
        "POST",
        "/admin/v2/schemas/t/ns/my-topic/schema",
        {},
        {"type": "STRING", "schema": "", "properties": {}},
    ),
    (
        "schemas.delete",
        lambda a: a.schemas.delete_schema(T),
        "DELETE",
        "/admin/v2/schemas/t/ns/my-topic/schema",
        {},
        NO_BODY,
    ),
]


@pytest.mark.parametrize(
    ("fn", "method", "path", "query", "body"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_request_matches_reference(fn, method, path, query, body):
    admin, rec = _admin()
    fn(admin)
    assert len(rec.requests) == 1
    req = rec.requests[0]
    assert req.method == method
    assert req.url.raw_path.decode().split("?")[0] == path
    assert dict(parse_qsl(req.url.query.decode())) == query
    if body is NO_BODY:
        assert req.content == b""
    else:
        assert req.headers["content-type"] == "application/json"
        assert json.loads(req.content) == body


def test_every_table_policy_has_namespace_and_topic_methods():
    from magnetar.admin_client.namespaces import Namespaces
    from magnetar.admin_client.policies import POLICIES
    from magnetar.admin_client.topic_policies import TopicPolicies

    for spec in POLICIES.values():
        if spec.ns_suffix:
            assert callable(getattr(Namespaces, "get_" + spec.name)) and callable(
                getattr(Namespaces, "set_" + spec.name)
            )
        if spec.topic_suffix:
            assert callable(getattr(TopicPolicies, "set_" + spec.name))
    # every policy of the issue is present at namespace level
    for name in (
        "retention",
        "deduplication",
        "schema_compatibility_strategy",
        "auto_topic_creation",
        "persistence",
        "max_producers",
        "max_consumers",
        "max_unacked_messages_per_consumer",
        "publish_rate",
        "dispatch_rate",
        "subscription_types_enabled",
        "inactive_topic_policies",
        "delayed_delivery",
        "offload_policies",
        "replication_clusters",
    ):
        assert hasattr(Namespaces, "set_" + name), name


async def test_async_client_sends_the_same_requests():
    seen: list[tuple[str, str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.raw_path.decode(), request.content))
        if request.url.path.endswith("/retention") and request.method == "GET":
            return httpx.Response(200, json={"retentionTimeInMinutes": 5, "retentionSizeInMB": 1})
        return httpx.Response(204)

    async with AsyncPulsarAdmin("http://b:8080", transport=httpx.MockTransport(handler)) as admin:
        await admin.namespaces.set_retention("t/ns", RetentionPolicies(5, 1))
        got = await admin.namespaces.get_retention("t/ns")
        assert await admin.namespaces.get_message_ttl("t/ns") is None  # 204 = not set
    assert got == {"retentionTimeInMinutes": 5, "retentionSizeInMB": 1}
    assert seen[0] == ("POST", NS + "/retention", b'{"retentionTimeInMinutes":5,"retentionSizeInMB":1}')
    assert seen[1][:2] == ("GET", NS + "/retention")
