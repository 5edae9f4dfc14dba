# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Policy enforcement, second part: persistence (ensemble/quorums), backlog-quota hold,
max message size, stats fields -- with the official client against a real standalone.

The standalone has one bookie: persistence 1/1/1 is satisfiable (new ledgers' metadata
show it), 2/2/2 is not: the next ledger cannot be created, so sends fail (at the client's
send timeout) and new producers are refused, instead of the client looping forever on
send-fail/reconnect/resend.
"""

from __future__ import annotations

import time

import httpx
import pulsar
import pytest

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"
NS = "public/default"


@pytest.fixture(scope="module")
def client(standalone):  # type: ignore[no-untyped-def]
    c = pulsar.Client(standalone.broker_url, operation_timeout_seconds=3)
    yield c
    c.close()


def _persistence(e: int, w: int, a: int) -> dict:
    return {"bookkeeperEnsemble": e, "bookkeeperWriteQuorum": w, "bookkeeperAckQuorum": a}


def test_persistence_policy_new_ledgers_use_it(http: httpx.Client, client: pulsar.Client) -> None:
    path = f"{V2}/persistent/{NS}/enf-pers-ok"
    p = client.create_producer(f"persistent://{NS}/enf-pers-ok", batching_enabled=False)
    assert http.post(f"{path}/persistence", json=_persistence(1, 1, 1)).status_code == 204
    for i in range(7):  # ledgers roll every 5 entries in these tests
        p.send(b"m%d" % i)
    ledgers = http.get(f"{path}/internalStats", params={"metadata": "true"}).json()["ledgers"]
    assert len(ledgers) >= 2
    last = ledgers[-1]["metadata"]
    assert "ensembleSize=1" in last and "writeQuorumSize=1" in last and "ackQuorumSize=1" in last
    assert "metadata" not in http.get(f"{path}/internalStats").json()["ledgers"][-1]
    p.close()


def test_persistence_policy_unsatisfiable_fails_sends(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-pers-bad"
    path = f"{V2}/persistent/{NS}/enf-pers-bad"
    p = client.create_producer(t, batching_enabled=False, send_timeout_millis=2000)
    assert http.post(f"{path}/persistence", json=_persistence(2, 2, 2)).status_code == 204
    for i in range(5):  # fill the current ledger (made with the old ensemble)
        p.send(b"m%d" % i)
    t0 = time.monotonic()
    with pytest.raises(pulsar.Timeout):
        p.send(b"no ledger for this one")  # the next ledger needs 2 bookies: one exists
    assert time.monotonic() - t0 < 10  # failed at the send timeout, no endless resend loop
    with pytest.raises((pulsar.BrokerPersistenceError, pulsar.Timeout)):
        client.create_producer(t)  # refused (cpp retries the PersistenceError until its timeout)
    # fixing the policy lets producers in and sends succeed again, on a 1-bookie ledger
    assert http.post(f"{path}/persistence", json=_persistence(1, 1, 1)).status_code == 204
    p2 = client.create_producer(t, batching_enabled=False)
    p2.send(b"ok")
    last = http.get(f"{path}/internalStats", params={"metadata": "true"}).json()["ledgers"][-1]
    assert "ensembleSize=1" in last["metadata"]
    p.close()
    p2.close()


def test_backlog_quota_producer_request_hold(http: httpx.Client, client: pulsar.Client) -> None:
    """Over the quota a connected producer's sends are held (not failed) until the backlog
    drops below it; new producers are refused with ProducerBlockedQuotaExceededError."""
    t = f"persistent://{NS}/enf-hold"
    base = f"{V2}/persistent/{NS}/enf-hold"
    consumer = client.subscribe(t, "s", receiver_queue_size=1)
    p = client.create_producer(t, batching_enabled=False, send_timeout_millis=0)
    for _ in range(10):
        p.send(b"h" * 100)
    quota = {"limitSize": 500, "limitTime": -1, "policy": "producer_request_hold"}
    assert http.post(f"{base}/backlogQuota", json=quota).status_code == 204
    time.sleep(0.5)  # the enforcer's pass (200 ms) disconnects the producer
    held: list[object] = []
    p.send_async(b"held", lambda res, msg_id: held.append(res))
    time.sleep(1.5)
    assert held == []  # neither stored nor failed: held
    with pytest.raises((pulsar.ProducerBlockedQuotaExceededError, pulsar.Timeout)):
        client.create_producer(t)
    assert http.post(f"{base}/subscription/s/skip_all").status_code == 204
    deadline = time.monotonic() + 15
    while not held and time.monotonic() < deadline:
        time.sleep(0.1)
    assert held == [pulsar.Result.Ok]  # backlog gone: the held send went through
    assert http.get(f"{base}/stats").json()["subscriptions"]["s"]["msgBacklog"] >= 1
    p.close()
    consumer.close()


def test_max_message_size_topic_policy(http: httpx.Client, client: pulsar.Client) -> None:
    """A message over the topic's maxMessageSize fails that send (the producer stays)."""
    path = f"{V2}/persistent/{NS}/enf-maxsize"
    p = client.create_producer(
        f"persistent://{NS}/enf-maxsize", batching_enabled=False, chunking_enabled=False
    )
    assert http.post(f"{path}/maxMessageSize", json=1024).status_code == 204
    with pytest.raises(pulsar.ChecksumError):  # the soft SEND_ERROR code; the reason is in its message
        p.send(b"x" * 2000)
    p.send(b"x" * 100)  # small ones still go
    assert http.delete(f"{path}/maxMessageSize").status_code == 204
    p.send(b"x" * 2000)  # limit lifted without a restart
    p.close()


def test_encryption_required_namespace_policy(http: httpx.Client, client: pulsar.Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    http.put(f"{V2}/tenants/enfenc", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enfenc/ns").status_code == 204
    t = "persistent://enfenc/ns/t"
    p = client.create_producer(t, batching_enabled=False)
    p.send(b"plain, allowed")
    assert http.post(f"{V2}/namespaces/enfenc/ns/encryptionRequired", json=True).status_code == 204
    with pytest.raises(pulsar.ChecksumError):
        p.send(b"plain, refused")
    with pytest.raises((pulsar.BrokerMetadataError, pulsar.Timeout)):
        client.create_producer(t)  # an unencrypted producer is refused
    # an encrypting producer is admitted and its messages stored
    pub, priv = _rsa_keys(tmp_path)
    reader = pulsar.CryptoKeyReader(pub, priv)
    enc = client.create_producer(
        t, encryption_key="app-key", crypto_key_reader=reader, batching_enabled=False
    )
    enc.send(b"encrypted, allowed")
    enc.close()
    assert http.post(f"{V2}/namespaces/enfenc/ns/encryptionRequired", json=False).status_code == 204
    p.send(b"plain, allowed again")
    p.close()


def _rsa_keys(directory) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(65537, 2048)
    pub, priv = directory / "k.pub.pem", directory / "k.priv.pem"
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    priv.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(pub), str(priv)


def test_subscribe_rate_topic_policy(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-subrate"
    path = f"{V2}/persistent/{NS}/enf-subrate"
    assert http.put(path).status_code == 204
    rate = {"subscribeThrottlingRatePerConsumer": 2, "ratePeriodInSecond": 30}
    assert http.post(f"{path}/subscribeRate", json=rate).status_code == 204
    for _ in range(2):
        client.subscribe(t, "s", consumer_name="same").close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(t, "s", consumer_name="same")  # third subscribe within the period
    client.subscribe(t, "s", consumer_name="other").close()  # per consumer identity
    assert http.delete(f"{path}/subscribeRate").status_code == 204
    client.subscribe(t, "s", consumer_name="same").close()  # lifted without a restart


def _sync_sends_in(p: pulsar.Producer, payload: bytes, seconds: float) -> int:
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        p.send(payload)
        n += 1
    return n


def test_publish_byte_rate_limit_and_stats_fields(http: httpx.Client, client: pulsar.Client) -> None:
    """publishThrottlingRateInByte caps the byte rate; stats count publishRateLimitedTimes;
    with no consumers msgRateOut is a float 0.0 (Pulsar's double)."""
    base = f"{V2}/persistent/{NS}/enf-pubbytes"
    p = client.create_producer(f"persistent://{NS}/enf-pubbytes", batching_enabled=False)
    payload = b"b" * 500
    rate = {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": 5000}
    assert http.post(f"{base}/publishRate", json=rate).status_code == 204
    limited = _sync_sends_in(p, payload, 2.5)
    print(f"publish byte rate limited to 5000 B/s: {limited * 500 / 2.5:.0f} B/s")
    assert limited <= 3 * (5000 // 500 + 2), limited  # at most 3 one-second windows of ~10 messages
    stats = http.get(f"{base}/stats").json()
    assert stats["publishRateLimitedTimes"] >= 1
    assert isinstance(stats["msgRateOut"], float) and stats["msgRateOut"] == 0.0
    assert isinstance(stats["msgThroughputOut"], float)
    assert http.delete(f"{base}/publishRate").status_code == 204
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


def test_dispatch_byte_rate_limit_caps_delivery(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/enf-dispbytes"
    base = f"{V2}/persistent/{NS}/enf-dispbytes"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/s", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    rate = {
        "dispatchThrottlingRateInMsg": -1,
        "dispatchThrottlingRateInByte": 5000,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    }
    assert http.post(f"{base}/dispatchRate", json=rate).status_code == 204
    p = client.create_producer(t, batching_enabled=False)
    for _ in range(150):
        p.send_async(b"d" * 500, None)
    p.flush()
    consumer = client.subscribe(t, "s", receiver_queue_size=1000)
    got = _received_in(consumer, 2.5)
    print(f"dispatch byte rate: limited to 5000 B/s -> {got * 500 / 2.5:.0f} B/s of payload")
    assert 5 <= got <= 3 * (5000 // 500 + 2), got  # at most 3 one-second windows of ~10 entries
    assert http.delete(f"{base}/dispatchRate").status_code == 204
    assert _received_in(consumer, 1.5) >= 150 - got - 20  # lifted live
    consumer.close()
    p.close()


@pytest.mark.slow  # the policy's unit is minutes: ~65 s
def test_subscription_expiration_time(http: httpx.Client, client: pulsar.Client) -> None:
    http.put(f"{V2}/tenants/enfexp", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enfexp/ns").status_code == 204
    base = f"{V2}/persistent/enfexp/ns/t"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/idle", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    busy = client.subscribe("persistent://enfexp/ns/t", "busy")
    assert http.post(f"{V2}/namespaces/enfexp/ns/subscriptionExpirationTime", json=1).status_code == 204
    deadline = time.monotonic() + 90
    subs = http.get(f"{base}/subscriptions").json()
    while "idle" in subs and time.monotonic() < deadline:
        time.sleep(1)
        subs = http.get(f"{base}/subscriptions").json()
    assert subs == ["busy"]  # the idle one expired, the one with a consumer stays
    busy.close()


def test_deduplication_snapshot_interval(http: httpx.Client, client: pulsar.Client) -> None:
    """With deduplicationSnapshotInterval set, the dedup cursor's snapshot (its mark-delete
    position) follows the stored messages within the interval, not every 1000 entries."""
    http.put(f"{V2}/tenants/enfsnap", json={"allowedClusters": ["standalone"]})
    assert http.put(f"{V2}/namespaces/enfsnap/ns").status_code == 204
    assert http.post(f"{V2}/namespaces/enfsnap/ns/deduplication", json=True).status_code == 204
    assert http.post(f"{V2}/namespaces/enfsnap/ns/deduplicationSnapshotInterval", json=1).status_code == 204
    p = client.create_producer("persistent://enfsnap/ns/t", producer_name="snap", batching_enabled=False)
    last = None
    for i in range(3):
        last = p.send(b"s%d" % i)
    want = f"{last.ledger_id()}:{last.entry_id()}"
    deadline = time.monotonic() + 5
    mark = None
    while mark != want and time.monotonic() < deadline:
        time.sleep(0.2)
        cursors = http.get(f"{V2}/persistent/enfsnap/ns/t/internalStats").json()["cursors"]
        mark = cursors.get("pulsar.dedup", {}).get("markDeletePosition")
    assert mark == want
    p.close()
