# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Clusters, tenants, namespaces and namespace policies over HTTP against a real standalone."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"


def reason_of(r: httpx.Response) -> str:
    assert r.headers["content-type"].startswith("application/json"), r.text
    body = r.json()
    assert set(body) == {"reason"}, body
    return body["reason"]


def test_clusters(http: httpx.Client) -> None:
    r = http.get(f"{V2}/clusters")
    assert r.status_code == 200 and r.json() == ["standalone"]
    data = http.get(f"{V2}/clusters/standalone").json()
    assert data["serviceUrl"].startswith("http://") and data["brokerServiceUrl"].startswith("pulsar://")
    assert http.get(f"{V2}/clusters/nope").status_code == 404
    body = {"serviceUrl": "http://c2:8080", "brokerServiceUrl": "pulsar://c2:6650"}
    r = http.put(f"{V2}/clusters/c2", json=body)
    assert r.status_code == 200 and r.content == b""
    assert http.put(f"{V2}/clusters/c2", json=body).status_code == 409
    assert http.put(f"{V2}/clusters/bad%20name", json=body).status_code == 412
    assert http.post(f"{V2}/clusters/c2", json={**body, "serviceUrl": "http://c2b:8080"}).status_code == 200
    assert http.get(f"{V2}/clusters/c2").json()["serviceUrl"] == "http://c2b:8080"
    assert http.post(f"{V2}/clusters/standalone/peers", json=["c2"]).status_code == 204
    assert http.get(f"{V2}/clusters/standalone/peers").json() == ["c2"]
    assert http.post(f"{V2}/clusters/standalone/peers", json=["zz"]).status_code == 412
    assert http.post(f"{V2}/clusters/standalone/peers", json=[]).status_code == 204
    assert http.delete(f"{V2}/clusters/c2").status_code == 204
    assert http.delete(f"{V2}/clusters/c2").status_code == 404
    # a cluster a tenant uses cannot go
    assert "not empty" in reason_of(http.delete(f"{V2}/clusters/standalone")).lower()


def test_tenants(http: httpx.Client) -> None:
    assert {"public", "pulsar"} <= set(http.get(f"{V2}/tenants").json())
    r = http.put(f"{V2}/tenants/t1", json={"adminRoles": ["admin"], "allowedClusters": ["standalone"]})
    assert r.status_code == 204
    assert http.get(f"{V2}/tenants/t1").json() == {"adminRoles": ["admin"], "allowedClusters": ["standalone"]}
    assert http.put(f"{V2}/tenants/t1", json={"allowedClusters": ["standalone"]}).status_code == 409
    assert http.put(f"{V2}/tenants/t2", json={"allowedClusters": []}).status_code == 412
    assert http.put(f"{V2}/tenants/t2", json={"allowedClusters": ["nope"]}).status_code == 412
    assert http.put(f"{V2}/tenants/a$b", json={"allowedClusters": ["standalone"]}).status_code == 412
    assert (
        http.post(f"{V2}/tenants/t1", json={"adminRoles": [], "allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.get(f"{V2}/tenants/t1").json()["adminRoles"] == []
    assert http.get(f"{V2}/tenants/nope").status_code == 404
    assert http.post(f"{V2}/tenants/nope", json={"allowedClusters": ["standalone"]}).status_code == 404
    assert http.put(f"{V2}/namespaces/t1/ns", json={}).status_code == 204
    assert http.delete(f"{V2}/tenants/t1").status_code == 409
    assert http.delete(f"{V2}/namespaces/t1/ns").status_code == 204
    assert http.delete(f"{V2}/tenants/t1").status_code == 204
    assert http.delete(f"{V2}/tenants/t1").status_code == 404


@pytest.fixture(scope="module")
def ns(http: httpx.Client) -> str:
    assert http.put(f"{V2}/tenants/pt", json={"allowedClusters": ["standalone"]}).status_code == 204
    assert http.put(f"{V2}/namespaces/pt/ns", content=b"").status_code == 204
    return "pt/ns"


def test_namespace_lifecycle(http: httpx.Client, ns: str) -> None:
    assert http.get(f"{V2}/namespaces/pt").json() == ["pt/ns"]
    pol = http.get(f"{V2}/namespaces/{ns}").json()
    assert pol["replication_clusters"] == ["standalone"]
    assert pol["bundles"]["numBundles"] == 4 and len(pol["bundles"]["boundaries"]) == 5
    assert pol["message_ttl_in_seconds"] is None and pol["schema_compatibility_strategy"] == "UNDEFINED"
    assert http.put(f"{V2}/namespaces/{ns}").status_code == 409
    assert http.get(f"{V2}/namespaces/nope").status_code == 404
    assert http.get(f"{V2}/namespaces/pt/nope").status_code == 404
    assert http.put(f"{V2}/namespaces/nope/x").status_code == 404
    assert http.put(f"{V2}/namespaces/pt/b8", json={"bundles": {"numBundles": 8}}).status_code == 204
    b = http.get(f"{V2}/namespaces/pt/b8/bundles").json()
    assert b["numBundles"] == 8 and b["boundaries"][0] == "0x00000000" and b["boundaries"][-1] == "0xffffffff"
    assert http.put(f"{V2}/namespaces/pt/bad", json={"replication_clusters": ["c9"]}).status_code == 412
    # non-empty namespace: 409, then force deletes the topics too
    assert http.put(f"{V2}/persistent/pt/b8/t1").status_code == 204
    assert http.delete(f"{V2}/namespaces/pt/b8").status_code == 409
    assert http.delete(f"{V2}/namespaces/pt/b8?force=true").status_code == 204
    assert http.get(f"{V2}/namespaces/pt/b8").status_code == 404


SCALARS = [
    ("messageTTL", "message_ttl_in_seconds", 30),
    ("maxProducersPerTopic", "max_producers_per_topic", 3),
    ("maxConsumersPerTopic", "max_consumers_per_topic", 4),
    ("maxConsumersPerSubscription", "max_consumers_per_subscription", 2),
    ("maxUnackedMessagesPerConsumer", "max_unacked_messages_per_consumer", 100),
    ("maxUnackedMessagesPerSubscription", "max_unacked_messages_per_subscription", 1000),
    ("maxSubscriptionsPerTopic", "max_subscriptions_per_topic", 9),
    ("maxTopicsPerNamespace", "max_topics_per_namespace", 99),
    ("subscriptionExpirationTime", "subscription_expiration_time_minutes", 60),
    ("deduplicationSnapshotInterval", "deduplicationSnapshotIntervalSeconds", 120),
    ("deduplication", "deduplicationEnabled", True),
    ("encryptionRequired", "encryption_required", True),
    ("isAllowAutoUpdateSchema", "is_allow_auto_update_schema", False),
    ("schemaValidationEnforced", "schema_validation_enforced", True),
]


@pytest.mark.parametrize(("suffix", "field", "value"), SCALARS)
def test_scalar_policies(http: httpx.Client, ns: str, suffix: str, field: str, value: object) -> None:
    url = f"{V2}/namespaces/{ns}/{suffix}"
    before = http.get(url)
    assert before.status_code in (200, 204)
    assert http.post(url, json=value).status_code == 204
    r = http.get(url)
    assert r.status_code == 200 and r.json() == value
    assert http.get(f"{V2}/namespaces/{ns}").json()[field] == value
    assert (
        http.post(url, content=b"{not json", headers={"content-type": "application/json"}).status_code == 400
    )
    if isinstance(value, int) and not isinstance(value, bool):
        assert http.post(url, json=-5).status_code == 412
    if suffix not in ("encryptionRequired", "isAllowAutoUpdateSchema", "schemaValidationEnforced"):
        assert http.delete(url).status_code == 204
        assert http.get(url).status_code == 204
    assert http.get(f"{V2}/namespaces/pt/nope/{suffix}").status_code == 404


OBJECTS = [
    ("retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}),
    (
        "persistence",
        {
            "bookkeeperEnsemble": 1,
            "bookkeeperWriteQuorum": 1,
            "bookkeeperAckQuorum": 1,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
    ),
    (
        "dispatchRate",
        {
            "dispatchThrottlingRateInMsg": 10,
            "dispatchThrottlingRateInByte": -1,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 1,
        },
    ),
    (
        "subscriptionDispatchRate",
        {
            "dispatchThrottlingRateInMsg": 5,
            "dispatchThrottlingRateInByte": 100,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 2,
        },
    ),
    ("publishRate", {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": -1}),
    ("subscribeRate", {"subscribeThrottlingRatePerConsumer": 5, "ratePeriodInSecond": 30}),
    (
        "inactiveTopicPolicies",
        {
            "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
            "maxInactiveDurationSeconds": 30,
            "deleteWhileInactive": True,
        },
    ),
    ("delayedDelivery", {"tickTime": 500, "active": False, "maxDeliveryDelayInMillis": 0}),
    (
        "autoTopicCreation",
        {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3},
    ),
    ("autoSubscriptionCreation", {"allowAutoSubscriptionCreation": False}),
]


@pytest.mark.parametrize(("suffix", "value"), OBJECTS)
def test_object_policies(http: httpx.Client, ns: str, suffix: str, value: dict) -> None:
    url = f"{V2}/namespaces/{ns}/{suffix}"
    assert http.post(url, json=value).status_code == 204
    got = http.get(url).json()
    assert {k: got[k] for k in value} == value
    assert http.post(url, json=[1, 2]).status_code == 400
    assert http.delete(url).status_code == 204
    assert http.get(url).status_code == 204


def test_policy_validation(http: httpx.Client, ns: str) -> None:
    base = f"{V2}/namespaces/{ns}"
    r = http.post(
        f"{base}/persistence",
        json={"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1},
    )
    assert r.status_code == 400 and reason_of(r)
    r = http.post(
        f"{base}/autoTopicCreation", json={"allowAutoTopicCreation": True, "topicType": "partitioned"}
    )
    assert r.status_code == 400
    r = http.post(f"{base}/subscriptionTypesEnabled", json=["Shared", "Bogus"])
    assert r.status_code == 400
    assert http.post(f"{base}/subscriptionTypesEnabled", json=["Shared", "Exclusive"]).status_code == 204
    assert http.get(f"{base}/subscriptionTypesEnabled").json() == ["Exclusive", "Shared"]
    assert http.delete(f"{base}/subscriptionTypesEnabled").status_code == 204
    assert http.get(f"{base}/subscriptionTypesEnabled").json() == []
    # schema compatibility is a PUT with a bare enum string
    assert http.put(f"{base}/schemaCompatibilityStrategy", json="FORWARD").status_code == 204
    assert http.get(f"{base}/schemaCompatibilityStrategy").json() == "FORWARD"
    assert http.put(f"{base}/schemaCompatibilityStrategy", json="SIDEWAYS").status_code == 400
    # backlog quota vs retention (412 both ways)
    assert (
        http.post(
            f"{base}/retention", json={"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}
        ).status_code
        == 204
    )
    r = http.post(
        f"{base}/backlogQuota", json={"limitSize": 10 * 1024 * 1024, "policy": "producer_exception"}
    )
    assert r.status_code == 412 and "Retention" in reason_of(r)
    assert http.delete(f"{base}/retention").status_code == 204
    r = http.post(
        f"{base}/backlogQuota?backlogQuotaType=destination_storage",
        json={"limit": 2048, "policy": "producer_exception"},
    )
    assert r.status_code == 204
    q = http.get(f"{base}/backlogQuotaMap").json()
    assert (
        q["destination_storage"]["limitSize"] == 2048
        and q["destination_storage"]["policy"] == "producer_exception"
    )
    assert (
        http.post(
            f"{base}/backlogQuota?backlogQuotaType=message_age",
            json={"limitTime": 60, "policy": "consumer_backlog_eviction"},
        ).status_code
        == 204
    )
    assert set(http.get(f"{base}/backlogQuotaMap").json()) == {"destination_storage", "message_age"}
    assert http.delete(f"{base}/backlogQuota?backlogQuotaType=message_age").status_code == 204
    assert http.delete(f"{base}/backlogQuota").status_code == 204
    assert http.get(f"{base}/backlogQuotaMap").json() == {}
    assert http.post(f"{base}/backlogQuota?backlogQuotaType=bogus", json={}).status_code == 400


def test_replication_permissions_properties(http: httpx.Client, ns: str) -> None:
    base = f"{V2}/namespaces/{ns}"
    assert http.get(f"{base}/replication").json() == ["standalone"]
    assert http.post(f"{base}/replication", json=["nope"]).status_code == 412
    assert http.post(f"{base}/permissions/alice", json=["produce", "consume"]).status_code == 204
    assert http.get(f"{base}/permissions").json() == {"alice": ["consume", "produce"]}
    assert http.post(f"{base}/permissions/bob", json=["fly"]).status_code == 400
    assert http.delete(f"{base}/permissions/alice").status_code == 204
    assert http.get(f"{base}/permissions").json() == {}
    assert http.post(f"{base}/permissions/subscription/s1", json=["r1", "r2"]).status_code == 204
    assert http.get(f"{base}/permissions/subscription").json() == {"s1": ["r1", "r2"]}
    assert http.put(f"{base}/properties", json={"a": "1", "b": "2"}).status_code == 204
    assert http.put(f"{base}/property/c/3").status_code == 204
    assert http.get(f"{base}/properties").json() == {"a": "1", "b": "2", "c": "3"}
    assert http.get(f"{base}/property/c").json() == "3"
    assert http.delete(f"{base}/property/c").status_code == 204
    assert http.get(f"{base}/property/c").status_code == 204
    assert http.delete(f"{base}/properties").status_code == 204
    assert http.get(f"{base}/properties").json() == {}
    r = http.post(f"{base}/antiAffinity", content=b"group-a", headers={"content-type": "application/json"})
    assert r.status_code == 204
    assert http.get(f"{base}/antiAffinity").json() == "group-a"
    assert http.put(f"{base}/offloadThreshold", json=1024).status_code == 204
    assert http.get(f"{base}/offloadThreshold").json() == 1024
    assert (
        http.post(f"{base}/offloadPolicies", json={"managedLedgerOffloadDriver": "filesystem"}).status_code
        == 204
    )
    assert http.get(f"{base}/offloadPolicies").json()["managedLedgerOffloadDriver"] == "filesystem"
    assert http.delete(f"{base}/removeOffloadPolicies").status_code == 204
    assert http.get(f"{base}/offloadPolicies").status_code == 204


def test_validation_errors_have_reason(http: httpx.Client) -> None:
    r = http.put(f"{V2}/tenants/tx", content=b"[", headers={"content-type": "application/json"})
    assert r.status_code in (400, 422) and reason_of(r)
    r = http.post(f"{V2}/clusters/standalone", json={"serviceUrl": 5})
    assert r.status_code in (400, 422) and reason_of(r)
    r = http.get(f"{V2}/no/such/path/at/all/here/x")
    assert r.status_code == 404 and reason_of(r)


def test_brokers_and_bookies(http: httpx.Client, standalone) -> None:  # type: ignore[no-untyped-def]
    me = standalone.web_url.split("://", 1)[1]
    assert http.get(f"{V2}/brokers").json() == [me]
    assert http.get(f"{V2}/brokers/standalone").json() == [me]
    assert http.get(f"{V2}/brokers/nope").status_code == 404
    assert http.get(f"{V2}/brokers/leaderBroker").json() == {"serviceUrl": standalone.web_url, "brokerId": me}
    owned = http.get(f"{V2}/brokers/standalone/{me}/ownedNamespaces").json()
    assert owned["public/default/0x00000000_0x40000000"]["broker_assignment"] == "primary"
    assert http.get(f"{V2}/brokers/health").text == "ok"
    names = http.get(f"{V2}/brokers/configuration").json()
    assert "maxUnackedMessagesPerConsumer" in names
    assert http.post(f"{V2}/brokers/configuration/maxUnackedMessagesPerConsumer/123").status_code == 204
    assert http.get(f"{V2}/brokers/configuration/values").json()["maxUnackedMessagesPerConsumer"] == "123"
    assert http.get(f"{V2}/brokers/configuration/runtime").json()["maxUnackedMessagesPerConsumer"] == "123"
    assert http.post(f"{V2}/brokers/configuration/maxUnackedMessagesPerConsumer/abc").status_code == 412
    assert http.post(f"{V2}/brokers/configuration/clusterName/x").status_code == 412
    assert http.delete(f"{V2}/brokers/configuration/maxUnackedMessagesPerConsumer").status_code == 204
    assert "maxUnackedMessagesPerConsumer" not in http.get(f"{V2}/brokers/configuration/values").json()
    bookies = http.get(f"{V2}/bookies/all").json()["bookies"]
    assert len(bookies) >= 1 and ":" in bookies[0]["bookieId"]
    # What the bookie publishes in its registration node: state and the space of its fullest directory.
    assert bookies[0]["readOnly"] is False
    assert bookies[0]["totalSpace"] > bookies[0]["freeSpace"] > 0
    assert http.get(f"{V2}/bookies/racks-info").json() == {}
    doc = http.get("/openapi.json").json()
    assert "/admin/v2/namespaces/{tenant}/{namespace}/retention" in doc["paths"]
    assert "RetentionPolicies" in doc["components"]["schemas"]
