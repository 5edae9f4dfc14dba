# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Policy enforcement, one test per policy, with the official client against a real standalone.

Each test writes a policy over the admin REST to a *live* topic (no restart)
and shows its effect on what the client can do.
"""

from __future__ import annotations

import time

import httpx
import pulsar
import pytest

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"
NS = "public/default"
SETTLE_S = 0.3  # > the enforcer's pass interval in these tests (200 ms) -- changes apply on write anyway


@pytest.fixture(scope="module")
def client(standalone):  # type: ignore[no-untyped-def]
    c = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    yield c
    c.close()


def client_url(http: httpx.Client) -> str:
    return http.get(f"{V2}/clusters/standalone").json()["brokerServiceUrl"]


def test_max_producers_topic_policy(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-maxprod"
    p1 = client.create_producer(t)
    assert http.post(f"{V2}/persistent/{NS}/enf-maxprod/maxProducers", json=1).status_code == 204
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(t)
    assert http.delete(f"{V2}/persistent/{NS}/enf-maxprod/maxProducers").status_code == 204
    p2 = client.create_producer(t)  # limit lifted without a restart
    p1.close()
    p2.close()


def test_max_consumers_namespace_policy(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/mc").status_code == 204
    t = "persistent://enf/mc/t"
    c1 = client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    assert http.post(f"{V2}/namespaces/enf/mc/maxConsumersPerTopic", json=1).status_code == 204
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    # the topic level overrides the namespace
    assert http.post(f"{V2}/persistent/enf/mc/t/maxConsumers", json=2).status_code == 204
    c2 = client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    assert http.post(f"{V2}/persistent/enf/mc/t/maxConsumersPerSubscription", json=2).status_code == 204
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    c1.close()
    c2.close()


def test_subscription_types_enabled(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-subtypes"
    assert http.put(f"{V2}/persistent/{NS}/enf-subtypes").status_code == 204
    assert (
        http.post(
            f"{V2}/persistent/{NS}/enf-subtypes/subscriptionTypesEnabled", json=["Exclusive"]
        ).status_code
        == 204
    )
    client.subscribe(t, "ex", consumer_type=pulsar.ConsumerType.Exclusive).close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(t, "sh", consumer_type=pulsar.ConsumerType.Shared)
    assert http.delete(f"{V2}/persistent/{NS}/enf-subtypes/subscriptionTypesEnabled").status_code == 204
    client.subscribe(t, "sh", consumer_type=pulsar.ConsumerType.Shared).close()


def test_message_ttl_namespace_policy(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/ttl").status_code == 204
    t = "persistent://enf/ttl/t"
    consumer = client.subscribe(t, "s")
    p = client.create_producer(t, batching_enabled=False)
    for i in range(5):
        p.send(b"x%d" % i)
    stats = http.get(f"{V2}/persistent/enf/ttl/t/stats").json()
    assert stats["subscriptions"]["s"]["msgBacklog"] == 5
    consumer.close()  # a disconnected subscription keeps its backlog ...
    time.sleep(1.2)
    assert http.get(f"{V2}/persistent/enf/ttl/t/stats").json()["subscriptions"]["s"]["msgBacklog"] == 5
    assert http.post(f"{V2}/namespaces/enf/ttl/messageTTL", json=1).status_code == 204
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # ... until the TTL expires it
        if http.get(f"{V2}/persistent/enf/ttl/t/stats").json()["subscriptions"]["s"]["msgBacklog"] == 0:
            break
        time.sleep(0.2)
    assert http.get(f"{V2}/persistent/enf/ttl/t/stats").json()["subscriptions"]["s"]["msgBacklog"] == 0
    p.close()


def test_max_unacked_on_consumer(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-unacked"
    assert http.put(f"{V2}/persistent/{NS}/enf-unacked").status_code == 204
    assert (
        http.post(f"{V2}/persistent/{NS}/enf-unacked/maxUnackedMessagesOnConsumer", json=3).status_code == 204
    )
    time.sleep(SETTLE_S)
    consumer = client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    p = client.create_producer(t, batching_enabled=False)
    for i in range(10):
        p.send(b"u%d" % i)
    got = []
    for _ in range(10):
        try:
            got.append(consumer.receive(700))
        except pulsar.Timeout:
            break
    assert len(got) == 3  # blocked at 3 unacked
    for m in got:  # Pulsar unblocks once unacked drops to half the limit
        consumer.acknowledge(m)
    more = consumer.receive(3000)
    assert more is not None
    consumer.close()
    p.close()


def test_auto_topic_creation_override(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/auto").status_code == 204
    assert (
        http.post(
            f"{V2}/namespaces/enf/auto/autoTopicCreation", json={"allowAutoTopicCreation": False}
        ).status_code
        == 204
    )
    with pytest.raises(Exception):  # noqa: B017 -- TopicNotFound in the client's words
        client.create_producer("persistent://enf/auto/nope")
    body = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 2}
    assert http.post(f"{V2}/namespaces/enf/auto/autoTopicCreation", json=body).status_code == 204
    client.create_producer("persistent://enf/auto/yes").close()
    assert http.get(f"{V2}/persistent/enf/auto/yes/partitions").json()["partitions"] == 2


def _ledgers(http: httpx.Client, path: str) -> int:
    return len(http.get(f"{V2}/persistent/{path}/internalStats").json()["ledgers"])


def test_retention_keeps_then_trims_ledgers(http: httpx.Client, client: pulsar.Client) -> None:
    # the module's standalone rolls a ledger every 5 entries (managedLedgerMaxEntriesPerLedger)
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/ret").status_code == 204
    keep = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert http.post(f"{V2}/namespaces/enf/ret/retention", json=keep).status_code == 204
    t = "persistent://enf/ret/t"
    consumer = client.subscribe(t, "s")
    time.sleep(SETTLE_S)  # a freshly loaded topic gets its policies on the enforcer's next pass
    p = client.create_producer(t, batching_enabled=False)
    for i in range(22):
        p.send(b"r%d" % i)
    for _ in range(22):
        consumer.acknowledge(consumer.receive(5000))
    time.sleep(SETTLE_S * 2)
    kept = _ledgers(http, "enf/ret/t")
    assert kept >= 4  # everything consumed, yet retained
    assert http.delete(f"{V2}/namespaces/enf/ret/retention").status_code == 204  # default: keep nothing
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _ledgers(http, "enf/ret/t") >= kept:
        time.sleep(0.2)
    assert _ledgers(http, "enf/ret/t") < kept
    consumer.close()
    p.close()


def _ledger_ids(http: httpx.Client, path: str) -> list[int]:
    return [li["ledgerId"] for li in http.get(f"{V2}/persistent/{path}/internalStats").json()["ledgers"]]


def test_retention_holds_when_the_topic_is_loaded_again(http: httpx.Client, client: pulsar.Client) -> None:
    """A topic is opened under its namespace's retention, not the broker's default (0: every
    consumed ledger goes): the trim that follows every open (an unload, a failover, a restart)
    must not delete retained ledgers before the policy enforcer's first pass."""
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/ret2").status_code == 204
    keep = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert http.post(f"{V2}/namespaces/enf/ret2/retention", json=keep).status_code == 204
    t = "persistent://enf/ret2/t"
    consumer = client.subscribe(t, "s")
    time.sleep(SETTLE_S)
    p = client.create_producer(t, batching_enabled=False)
    for i in range(22):
        p.send(b"r%d" % i)
    for _ in range(22):
        consumer.acknowledge(consumer.receive(5000))
    time.sleep(SETTLE_S * 2)
    before = _ledger_ids(http, "enf/ret2/t")
    assert len(before) >= 4  # everything consumed, yet retained
    consumer.close()
    p.close()
    for _ in range(2):  # loaded again, twice: each open runs a trim at once
        assert http.put(f"{V2}/persistent/enf/ret2/t/unload").status_code == 204
        p = client.create_producer(t, batching_enabled=False)  # loads the topic again
        p.send(b"after")
        time.sleep(SETTLE_S * 2)  # the open's trim and the enforcer's pass have both run
        after = _ledger_ids(http, "enf/ret2/t")
        p.close()
        assert set(before) <= set(after), (before, after)
    reader = client.create_reader(t, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000).data())
    reader.close()
    assert got == [b"r%d" % i for i in range(22)] + [b"after", b"after"]


def test_backlog_quota_producer_exception(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-quota"
    base = f"{V2}/persistent/{NS}/enf-quota"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/s", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    p = client.create_producer(t, batching_enabled=False)
    for _ in range(10):
        p.send(b"q" * 100)
    p.close()
    quota = {"limitSize": 500, "limitTime": -1, "policy": "producer_exception"}
    assert http.post(f"{base}/backlogQuota", json=quota).status_code == 204
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(t)
    assert http.post(f"{base}/subscription/s/skip_all").status_code == 204
    client.create_producer(t).close()  # backlog gone: admitted again


def test_backlog_quota_consumer_backlog_eviction(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-evict"
    base = f"{V2}/persistent/{NS}/enf-evict"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/s", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    p = client.create_producer(t, batching_enabled=False)
    for _ in range(20):
        p.send(b"e" * 100)
    assert http.get(f"{base}/stats").json()["subscriptions"]["s"]["msgBacklog"] == 20
    quota = {"limitSize": 600, "limitTime": -1, "policy": "consumer_backlog_eviction"}
    assert http.post(f"{base}/backlogQuota", json=quota).status_code == 204
    deadline = time.monotonic() + 10
    backlog = 20
    while time.monotonic() < deadline and backlog == 20:
        backlog = http.get(f"{base}/stats").json()["subscriptions"]["s"]["msgBacklog"]
        time.sleep(0.2)
    assert 0 < backlog < 20  # the oldest were evicted, the newest kept
    p.close()


def test_inactive_topic_policies_delete_idle_topic(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/idle").status_code == 204
    pol = {
        "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
        "maxInactiveDurationSeconds": 1,
        "deleteWhileInactive": True,
    }
    assert http.post(f"{V2}/namespaces/enf/idle/inactiveTopicPolicies", json=pol).status_code == 204
    producer = client.create_producer("persistent://enf/idle/gone")
    consumer = client.subscribe("persistent://enf/idle/kept", "s")  # has a subscription: kept
    consumer.close()
    # listed while its producer keeps it active (after 1 s idle it may go at any moment)
    assert "persistent://enf/idle/gone" in http.get(f"{V2}/persistent/enf/idle").json()
    producer.close()
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline
        and "persistent://enf/idle/gone" in http.get(f"{V2}/persistent/enf/idle").json()
    ):
        time.sleep(0.2)
    assert http.get(f"{V2}/persistent/enf/idle").json() == ["persistent://enf/idle/kept"]


def test_deduplication_namespace_policy(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/dedup").status_code == 204
    assert http.post(f"{V2}/namespaces/enf/dedup/deduplication", json=True).status_code == 204
    t = "persistent://enf/dedup/t"
    for _ in range(2):  # the same producer name re-sends the same sequence ids
        p = client.create_producer(t, producer_name="dp", batching_enabled=False)
        for seq in range(1, 6):  # the client treats sequence id 0 as "unset"
            p.send(b"d%d" % seq, sequence_id=seq)
        p.close()
    stats = http.get(f"{V2}/persistent/enf/dedup/t/stats").json()
    internal = http.get(f"{V2}/persistent/enf/dedup/t/internalStats").json()
    assert stats["deduplicationStatus"] == "Enabled"
    assert stats["msgInCounter"] == 5 and internal["entriesAddedCounter"] == 5


def _sync_sends_in(producer: pulsar.Producer, seconds: float) -> int:
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        producer.send(b"p")
        n += 1
    return n


def test_publish_rate_limit_caps_measured_rate(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-pubrate"
    base = f"{V2}/persistent/{NS}/enf-pubrate"
    p = client.create_producer(t, batching_enabled=False)
    unlimited = _sync_sends_in(p, 1.0)
    assert unlimited > 60  # the check below would not mean anything on a machine this slow
    assert (
        http.post(
            f"{base}/publishRate", json={"publishThrottlingRateInMsg": 20, "publishThrottlingRateInByte": -1}
        ).status_code
        == 204
    )
    limited = _sync_sends_in(p, 2.5)
    print(f"publish rate: unlimited {unlimited} msg/s, limited to 20: {limited / 2.5:.1f} msg/s")
    assert limited <= 20 * 3 + 3, (limited, unlimited)  # at most 3 one-second windows of 20
    assert http.delete(f"{base}/publishRate").status_code == 204
    # lifted without a restart: the next policy pass drops the limit (a window may still straddle it)
    deadline = time.monotonic() + 20
    lifted = _sync_sends_in(p, 1.0)
    while lifted <= 40 and time.monotonic() < deadline:
        lifted = _sync_sends_in(p, 1.0)
    assert lifted > 40, lifted
    p.close()


def _received_in(consumer: pulsar.Consumer, seconds: float) -> int:
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            consumer.acknowledge(consumer.receive(100))
            n += 1
        except pulsar.Timeout:
            pass
    return n


def test_dispatch_rate_limit_caps_delivery(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-disprate"
    base = f"{V2}/persistent/{NS}/enf-disprate"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/s", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    rate = {
        "dispatchThrottlingRateInMsg": 20,
        "dispatchThrottlingRateInByte": -1,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    }
    assert http.post(f"{base}/subscriptionDispatchRate", json=rate).status_code == 204
    p = client.create_producer(t, batching_enabled=False)
    for _ in range(150):
        p.send_async(b"d", None)
    p.flush()
    consumer = client.subscribe(t, "s", receiver_queue_size=1000)
    got = _received_in(consumer, 2.5)
    print(f"dispatch rate: limited to 20 msg/s -> {got / 2.5:.1f} msg/s")
    assert 20 <= got <= 20 * 3 + 3
    assert http.delete(f"{base}/subscriptionDispatchRate").status_code == 204
    assert _received_in(consumer, 1.5) >= 150 - got - 20  # lifted live: the rest arrives at once
    consumer.close()
    p.close()


def test_max_subscriptions_per_topic(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-maxsubs"
    base = f"{V2}/persistent/{NS}/enf-maxsubs"
    assert http.put(base).status_code == 204
    assert http.post(f"{base}/maxSubscriptionsPerTopic", json=1).status_code == 204
    client.subscribe(t, "a").close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(t, "b")
    client.subscribe(t, "a").close()  # an existing subscription is still fine


def test_auto_subscription_creation_override(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-autosub"
    base = f"{V2}/persistent/{NS}/enf-autosub"
    assert http.put(base).status_code == 204
    assert (
        http.post(
            f"{base}/autoSubscriptionCreation", json={"allowAutoSubscriptionCreation": False}
        ).status_code
        == 204
    )
    quick = pulsar.Client(client_url(http), operation_timeout_seconds=2)
    try:
        # the C++ client retries SubscriptionNotFound as a temporary error until its timeout
        with pytest.raises((pulsar.SubscriptionNotFound, pulsar.Timeout)):
            quick.subscribe(t, "new-sub")
    finally:
        quick.close()
    assert http.get(f"{base}/subscriptions").json() == []
    assert http.put(f"{base}/subscription/made").status_code == 204
    client.subscribe(t, "made").close()  # created over REST first: allowed


def test_delayed_delivery_disabled_by_policy(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enf", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enf/delay").status_code == 204
    pol = {"tickTime": 1000, "active": False, "maxDeliveryDelayInMillis": 0}
    assert http.post(f"{V2}/namespaces/enf/delay/delayedDelivery", json=pol).status_code == 204
    t = "persistent://enf/delay/t"
    client.create_producer(t).close()  # load the topic so its policies are in place
    time.sleep(SETTLE_S)
    consumer = client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    p = client.create_producer(t, batching_enabled=False)
    p.send(b"later", deliver_after=__import__("datetime").timedelta(seconds=30))
    applied = http.get(f"{V2}/persistent/enf/delay/t/delayedDelivery?applied=true").json()
    assert applied["active"] is False, applied
    msg = consumer.receive(3000)  # delivered at once: delayed delivery is off here
    assert msg.data() == b"later"
    consumer.close()
    p.close()


def test_max_unacked_on_subscription(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-unacked-sub"
    base = f"{V2}/persistent/{NS}/enf-unacked-sub"
    assert http.put(base).status_code == 204
    assert http.post(f"{base}/maxUnackedMessagesOnSubscription", json=4).status_code == 204
    time.sleep(SETTLE_S)
    c1 = client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    c2 = client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Shared)
    p = client.create_producer(t, batching_enabled=False)
    for i in range(12):
        p.send(b"v%d" % i)
    got = {c1: [], c2: []}
    for _ in range(3):
        for c in (c1, c2):
            try:
                got[c].append(c.receive(300))
            except pulsar.Timeout:
                pass
    assert sum(len(v) for v in got.values()) == 4  # the subscription as a whole is blocked at 4
    for c, msgs in got.items():
        for m in msgs:
            c.acknowledge(m)
    more = 0
    for _ in range(4):
        for c in (c1, c2):
            try:
                c.acknowledge(c.receive(500))
                more += 1
            except pulsar.Timeout:
                pass
    assert more >= 1  # unblocked after the acks
    c1.close()
    c2.close()
    p.close()
