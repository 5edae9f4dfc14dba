# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Policies that are accepted are applied: non-persistent topics, backlog-quota time limits,
maxTopicsPerNamespace, bookieAffinityGroup -- with the official client against a real standalone.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pulsar
import pytest

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"


@pytest.fixture(scope="module")
def client(standalone):  # type: ignore[no-untyped-def]
    c = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    yield c
    c.close()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topic_policies_apply_to_a_non_persistent_topic(standalone, http: httpx.Client, client) -> None:
    name = _name("np-pol")
    topic = f"non-persistent://public/default/{name}"
    consumer = client.subscribe(topic, "s")
    p1 = client.create_producer(topic)
    r = http.post(f"{V2}/non-persistent/public/default/{name}/maxProducers", json=1)
    assert r.status_code == 204, r.text
    time.sleep(1.0)  # a few policy passes (magnetarPolicyCheckIntervalMs=200)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)  # maxProducers=1 applies to the non-persistent topic
    p1.send(b"np")
    assert consumer.receive(timeout_millis=5000).data() == b"np"
    log = standalone.log_path.read_text(errors="replace")
    assert f"applying policies to {topic} failed" not in log
    assert "set_config" not in log
    p1.close()
    consumer.close()


# ---------------------------------------------------------------------------------- stats
def _stats(http: httpx.Client, name: str) -> dict:
    r = http.get(f"{V2}/persistent/public/default/{name}/stats")
    assert r.status_code == 200, r.text
    return r.json()


def test_backlog_size_counts_unacknowledged_bytes_exactly(http: httpx.Client, client) -> None:
    """Ten entries of different, known payload sizes; acks leave holes: backlogSize is the
    bytes of exactly the entries still unacknowledged."""
    name = _name("backlog-size")
    topic = f"persistent://public/default/{name}"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=20)
    producer = client.create_producer(topic, batching_enabled=False)
    payloads = [bytes([65 + i]) * (200 * (i + 1)) for i in range(10)]  # 200..2000 bytes
    for p in payloads:
        producer.send(p)
    stats = _stats(http, name)
    storage = stats["storageSize"]
    overhead = (storage - sum(map(len, payloads))) / 10  # the same metadata bytes per entry
    assert overhead == int(overhead) and 0 < overhead < 200
    entry = [int(overhead) + len(p) for p in payloads]
    assert stats["subscriptions"]["s"]["backlogSize"] == sum(entry) == storage
    assert stats["backlogSize"] == sum(entry)
    msgs = [consumer.receive(timeout_millis=5000) for _ in range(10)]
    assert [m.data() for m in msgs] == payloads
    for i in (2, 6):  # holes: the 3rd and 7th entries
        consumer.acknowledge(msgs[i])
    expected = sum(entry) - entry[2] - entry[6]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _stats(http, name)["subscriptions"]["s"]["backlogSize"] != expected:
        time.sleep(0.1)
    stats = _stats(http, name)
    assert stats["subscriptions"]["s"]["backlogSize"] == expected
    assert stats["subscriptions"]["s"]["msgBacklog"] == 8
    for i in (0, 1):  # mark-delete moves past 0..2
        consumer.acknowledge(msgs[i])
    expected = sum(entry[3:]) - entry[6]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _stats(http, name)["subscriptions"]["s"]["backlogSize"] != expected:
        time.sleep(0.1)
    stats = _stats(http, name)
    assert stats["subscriptions"]["s"]["backlogSize"] == expected
    assert stats["backlogSize"] == expected
    consumer.close()
    producer.close()


def test_ttl_expiry_counts_expired_messages(http: httpx.Client, client) -> None:
    name = _name("expired")
    topic = f"persistent://public/default/{name}"
    client.subscribe(topic, "ttl").close()  # a durable subscription with no consumer
    client.subscribe(topic, "manual").close()
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50)
    for i in range(4):
        producer.send(b"single-%d" % i)  # each flushed alone: 4 entries
    for i in range(3):
        producer.send_async(b"batched-%d" % i, None)
    producer.flush()  # one batch entry of 3 messages
    subs = _stats(http, name)["subscriptions"]
    assert subs["ttl"]["totalMsgExpired"] == 0 and subs["ttl"]["msgBacklog"] == 5
    time.sleep(1.2)
    r = http.post(f"{V2}/persistent/public/default/{name}/messageTTL?messageTTL=1")
    assert r.status_code == 204, r.text
    seen_rate = 0.0
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        ttl = _stats(http, name)["subscriptions"]["ttl"]
        seen_rate = max(seen_rate, ttl["msgRateExpired"])
        if ttl["totalMsgExpired"] == 7 and seen_rate > 0:
            break
        time.sleep(0.1)
    assert ttl["totalMsgExpired"] == 7, ttl  # 4 single messages + a batch of 3
    assert ttl["msgBacklog"] == 0 and ttl["lastExpireTimestamp"] > 0
    assert seen_rate > 0  # sampled every statsUpdateFrequencyInSecs (1 s here)
    # the admin expire-messages call counts too (the TTL pass has taken this one as well)
    manual = _stats(http, name)["subscriptions"]["manual"]
    assert manual["totalMsgExpired"] == 7
    producer.close()


# ---------------------------------------------------------------------------------- backlog quota: time
def _age_quota(http: httpx.Client, name: str, seconds: int, policy: str) -> None:
    r = http.post(
        f"{V2}/persistent/public/default/{name}/backlogQuota",
        params={"backlogQuotaType": "message_age"},
        json={"limitTime": seconds, "policy": policy},
    )
    assert r.status_code == 204, r.text


def test_message_age_quota_producer_exception(http: httpx.Client, client) -> None:
    """The oldest unacknowledged message older than limitTime blocks producers (exception);
    acknowledging it lets them in again."""
    name = _name("age-exc")
    topic = f"persistent://public/default/{name}"
    consumer = client.subscribe(topic, "slow", receiver_queue_size=5)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"old")
    _age_quota(http, name, 2, "producer_exception")
    time.sleep(0.8)
    client.create_producer(topic).close()  # younger than 2 s: admitted
    time.sleep(2.0)  # now older than the limit; the enforcer runs every 200 ms
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(topic)
    with pytest.raises(pulsar.PulsarException):
        producer.send(b"refused")  # the connected producer was disconnected and refused
    assert _stats(http, name)["oldestBacklogMessageAgeSeconds"] >= 2
    consumer.acknowledge(consumer.receive(timeout_millis=5000))
    deadline = time.monotonic() + 5
    admitted = None
    while admitted is None and time.monotonic() < deadline:
        try:
            admitted = client.create_producer(topic)
        except pulsar.ProducerBlockedQuotaExceededException:
            time.sleep(0.2)
    assert admitted is not None, "producers stay blocked after the backlog was acknowledged"
    admitted.send(b"new")
    admitted.close()
    consumer.close()


def test_message_age_quota_consumer_backlog_eviction(http: httpx.Client, client) -> None:
    name = _name("age-evict")
    topic = f"persistent://public/default/{name}"
    client.subscribe(topic, "slow").close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(b"old-%d" % i)
    _age_quota(http, name, 3, "consumer_backlog_eviction")
    time.sleep(3.3)
    producer.send(b"young")  # 3 s to live: the pass (every 200 ms) evicts only the old three
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _stats(http, name)["subscriptions"]["slow"]["msgBacklog"] != 1:
        time.sleep(0.1)
    assert _stats(http, name)["subscriptions"]["slow"]["msgBacklog"] == 1  # the old three evicted
    consumer = client.subscribe(topic, "slow")
    assert consumer.receive(timeout_millis=5000).data() == b"young"
    producer.send(b"still-allowed")  # eviction does not block producers
    consumer.close()
    producer.close()


# ---------------------------------------------------------------------------------- maxTopicsPerNamespace
def test_max_topics_per_namespace(http: httpx.Client, client) -> None:
    ns = f"public/{_name('maxtopics')}"
    assert http.put(f"{V2}/namespaces/{ns}", json={}).status_code == 204
    r = http.post(f"{V2}/namespaces/{ns}/maxTopicsPerNamespace", json=4)
    assert r.status_code == 204, r.text
    client.create_producer(f"persistent://{ns}/a").close()  # 1
    r = http.put(f"{V2}/persistent/{ns}/parted/partitions", json=2)  # 3 (partitions count one each)
    assert r.status_code == 204, r.text
    client.create_producer(f"non-persistent://{ns}/np").close()  # 4
    with pytest.raises(pulsar.NotAllowedError):  # the client sees the refusal, no retry loop
        client.create_producer(f"persistent://{ns}/b")
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(f"persistent://{ns}/c", "s")
    r = http.put(f"{V2}/persistent/{ns}/d")
    assert r.status_code == 412 and "Exceed maximum number of topics" in r.text, r.text
    r = http.put(f"{V2}/persistent/{ns}/parted2/partitions", json=1)
    assert r.status_code == 412, r.text
    # existing topics and partitions keep working
    p = client.create_producer(f"persistent://{ns}/parted")
    p.send(b"to a partition")
    p.close()
    client.create_producer(f"persistent://{ns}/a").close()
    # raising the limit lets creation through again
    assert http.post(f"{V2}/namespaces/{ns}/maxTopicsPerNamespace", json=5).status_code == 204
    client.create_producer(f"persistent://{ns}/b").close()


# ---------------------------------------------------------------------------------- bookieAffinityGroup
def _affinity(http: httpx.Client, ns: str, primary: str, secondary: str | None = None) -> None:
    body = {"bookkeeperAffinityGroupPrimary": primary, "bookkeeperAffinityGroupSecondary": secondary}
    r = http.post(f"{V2}/namespaces/{ns}/persistence/bookieAffinity", json=body)
    assert r.status_code == 204, r.text


def _last_ledger_metadata(http: httpx.Client, ns: str, local: str) -> str:
    r = http.get(f"{V2}/persistent/{ns}/{local}/internalStats", params={"metadata": "true"})
    assert r.status_code == 200, r.text
    return r.json()["ledgers"][-1]["metadata"]


def test_bookie_affinity_group_places_new_ledgers(http: httpx.Client, client) -> None:
    """The standalone's bookie is put in group g1.  A namespace with affinity g1 gets its new
    ledgers on it (isolation asked in the ledger's metadata); one with affinity g2 excludes it
    (a bookie of another group), so its next ledger cannot be created and producers are
    refused; g1 as the secondary group lets them in again (the primary has too few bookies)."""
    bookie = http.get(f"{V2}/bookies/all").json()["bookies"][0]["bookieId"]
    r = http.post(f"{V2}/bookies/racks-info/{bookie}", params={"group": "g1"}, json={"rack": "/rack-1"})
    assert r.status_code == 204, r.text
    try:
        assert http.get(f"{V2}/bookies/racks-info").json() == {
            "g1": {bookie: {"rack": "/rack-1", "hostname": None}}
        }
        assert http.get(f"{V2}/bookies/racks-info/{bookie}").json()["rack"] == "/rack-1"

        ns_in = f"public/{_name('aff-in')}"
        assert http.put(f"{V2}/namespaces/{ns_in}", json={}).status_code == 204
        _affinity(http, ns_in, "g1")
        assert (
            http.get(f"{V2}/namespaces/{ns_in}/persistence/bookieAffinity").json()[
                "bookkeeperAffinityGroupPrimary"
            ]
            == "g1"
        )
        p = client.create_producer(f"persistent://{ns_in}/t", batching_enabled=False)
        time.sleep(0.5)  # the policy pass gives the topic its placement
        for i in range(7):  # ledgers roll every 5 entries here
            p.send(b"in-%d" % i)
        md = _last_ledger_metadata(http, ns_in, "t")
        assert "EnsemblePlacementPolicyConfig" in md and bookie in md, md
        p.close()

        ns_out = f"public/{_name('aff-out')}"
        assert http.put(f"{V2}/namespaces/{ns_out}", json={}).status_code == 204
        _affinity(http, ns_out, "g2")  # no bookie in g2; the only one is in g1: excluded
        t = f"persistent://{ns_out}/t"
        # The topic opens under its namespace's placement (as Pulsar's managed-ledger config is
        # resolved before the open): its first ledger cannot be created, so no producer gets in.
        with pytest.raises((pulsar.BrokerPersistenceError, pulsar.Timeout)):
            client.create_producer(t)
        _affinity(http, ns_out, "g2", "g1")  # the secondary group may be used when the primary is short
        time.sleep(0.5)
        p2 = client.create_producer(t, batching_enabled=False)
        p2.send(b"placed on the secondary group")
        assert "EnsemblePlacementPolicyConfig" in _last_ledger_metadata(http, ns_out, "t")
        p2.close()
    finally:
        assert http.delete(f"{V2}/bookies/racks-info/{bookie}").status_code == 204
    assert http.get(f"{V2}/bookies/racks-info/{bookie}").status_code == 404
