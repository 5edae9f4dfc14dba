# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Topic admin over HTTP with the official client producing/consuming against a real standalone."""

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
    c = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
    yield c
    c.close()


def produce(client: pulsar.Client, topic: str, n: int, **kw: object) -> list:
    p = client.create_producer(topic, batching_enabled=False, **kw)
    ids = [p.send(f"m-{i}".encode(), properties={"k": str(i)}) for i in range(n)]
    p.close()
    return ids


def test_topic_lifecycle_and_stats(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/stats-t"
    assert http.put(f"{V2}/persistent/{NS}/stats-t").status_code == 204
    assert http.put(f"{V2}/persistent/{NS}/stats-t").status_code == 409
    assert f"persistent://{NS}/stats-t" in http.get(f"{V2}/persistent/{NS}").json()
    consumer = client.subscribe(t, "s1", consumer_type=pulsar.ConsumerType.Shared)
    produce(client, t, 10)
    for _ in range(4):
        consumer.acknowledge(consumer.receive(5000))
    time.sleep(0.3)
    st = http.get(f"{V2}/persistent/{NS}/stats-t/stats").json()
    assert st["msgInCounter"] == 10
    assert st["bytesInCounter"] > 0 and st["storageSize"] >= st["bytesInCounter"] - 1
    sub = st["subscriptions"]["s1"]
    assert sub["type"] == "Shared" and len(sub["consumers"]) == 1
    assert sub["msgOutCounter"] >= 4
    assert sub["msgBacklog"] == 6
    internal = http.get(f"{V2}/persistent/{NS}/stats-t/internalStats").json()
    assert internal["entriesAddedCounter"] == 10 and "s1" in internal["cursors"]
    assert "markDeletePosition" in internal["cursors"]["s1"]
    assert internal["cursors"]["s1"]["individuallyDeletedMessages"].startswith("[")
    assert http.delete(f"{V2}/persistent/{NS}/stats-t").status_code == 412  # consumer attached
    consumer.close()
    assert http.delete(f"{V2}/persistent/{NS}/stats-t").status_code == 204
    assert http.get(f"{V2}/persistent/{NS}/stats-t/stats").status_code == 404


def test_partitioned_topic(http: httpx.Client, client: pulsar.Client) -> None:
    base = f"{V2}/persistent/{NS}/pt3"
    assert http.put(f"{base}/partitions", json=2).status_code == 204
    assert http.get(f"{base}/partitions").json()["partitions"] == 2
    assert http.post(f"{base}/partitions", json=1).status_code == 422
    assert http.post(f"{base}/partitions", json=3).status_code == 204
    assert http.get(f"{base}/partitions").json()["partitions"] == 3
    assert f"persistent://{NS}/pt3" in http.get(f"{V2}/persistent/{NS}/partitioned").json()
    assert http.delete(base).status_code == 409
    produce(client, f"persistent://{NS}/pt3", 9)
    st = http.get(f"{base}/partitioned-stats").json()
    assert st["metadata"] == {"partitions": 3}
    assert st["msgInCounter"] == 9 and sum(p["msgInCounter"] for p in st["partitions"].values()) == 9
    assert http.put(f"{base}/subscription/all", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    assert http.get(f"{base}/subscriptions").json() == ["all"]
    st = http.get(f"{base}/partitioned-stats?perPartition=false").json()
    assert st["partitions"] == {} and st["subscriptions"]["all"]["msgBacklog"] == 9
    assert http.post(f"{base}/subscription/all/skip_all").status_code == 204
    st = http.get(f"{base}/partitioned-stats").json()
    assert st["subscriptions"]["all"]["msgBacklog"] == 0
    assert http.delete(f"{base}/partitions").status_code == 204
    assert http.get(f"{base}/partitions").json()["partitions"] == 0


def test_cursor_operations(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/cursor-t"
    base = f"{V2}/persistent/{NS}/cursor-t"
    assert http.put(base).status_code == 204
    assert http.put(f"{base}/subscription/early", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    assert http.put(f"{base}/subscription/early").status_code == 409
    ids = produce(client, t, 10)
    assert http.put(f"{base}/subscription/late").status_code == 204
    subs = http.get(f"{base}/subscriptions").json()
    assert subs == ["early", "late"]

    def backlog(sub: str) -> int:
        return http.get(f"{base}/stats").json()["subscriptions"][sub]["msgBacklog"]

    assert backlog("early") == 10 and backlog("late") == 0
    last = http.get(f"{base}/lastMessageId").json()
    assert (last["ledgerId"], last["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id())
    assert http.post(f"{base}/subscription/early/skip/3").status_code == 204
    assert backlog("early") == 7
    # peek: position 1 is the first unacked message (the 4th sent)
    r = http.get(f"{base}/subscription/early/position/1")
    assert r.status_code == 200 and r.content == b"m-3"
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["X-Pulsar-Message-ID"] == f"{ids[3].ledger_id()}:{ids[3].entry_id()}"
    assert r.headers["X-Pulsar-PROPERTY-k"] == "3"
    assert "T" in r.headers["X-Pulsar-publish-time"]
    assert http.get(f"{base}/subscription/early/position/99").status_code == 404
    r = http.get(f"{base}/examinemessage?initialPosition=earliest&messagePosition=1")
    assert r.content == b"m-0"
    r = http.get(f"{base}/examinemessage?initialPosition=latest&messagePosition=1")
    assert r.content == b"m-9"
    r = http.get(f"{base}/ledger/{ids[5].ledger_id()}/entry/{ids[5].entry_id()}")
    assert r.content == b"m-5"
    # reset by message id and by time
    body = {"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id()}
    assert http.post(f"{base}/subscription/late/resetcursor", json=body).status_code == 204
    assert backlog("late") == 9
    assert (
        http.post(f"{base}/subscription/late/resetcursor/{int(time.time() * 1000) + 60000}").status_code
        == 204
    )
    assert backlog("late") == 0
    assert http.post(f"{base}/subscription/late/resetcursor/0").status_code == 204
    assert backlog("late") == 10
    # expire everything older than 0 s, clear backlog
    assert http.post(f"{base}/subscription/late/expireMessages/0").status_code == 204
    assert backlog("late") == 0
    assert http.post(f"{base}/subscription/early/skip_all").status_code == 204
    assert backlog("early") == 0
    assert http.post(f"{base}/subscription/nope/skip_all").status_code == 404
    assert http.delete(f"{base}/subscription/early").status_code == 204
    assert http.delete(f"{base}/subscription/early").status_code == 404
    term = http.post(f"{base}/terminate")
    assert term.status_code == 200 and set(term.json()) >= {"ledgerId", "entryId", "partitionIndex"}
    with pytest.raises(pulsar.TopicTerminated):
        produce(client, t, 1, send_timeout_millis=3000)
    assert http.put(f"{base}/unload").status_code == 204
    assert http.delete(f"{base}?force=true").status_code == 204


def test_topic_policies_precedence_and_ttl(http: httpx.Client, client: pulsar.Client) -> None:
    t = f"persistent://{NS}/ttl-t"
    base = f"{V2}/persistent/{NS}/ttl-t"
    assert http.put(base).status_code == 204
    assert http.get(f"{base}/messageTTL").status_code == 204
    assert http.get(f"{base}/messageTTL?applied=true").json() == 0  # broker default
    assert http.post(f"{V2}/namespaces/{NS}/messageTTL", json=3600).status_code == 204
    assert http.get(f"{base}/messageTTL?applied=true").json() == 3600  # namespace
    assert http.post(f"{base}/messageTTL?messageTTL=1").status_code == 204
    assert http.get(f"{base}/messageTTL").json() == 1
    assert http.get(f"{base}/messageTTL?applied=true").json() == 1  # topic wins
    assert http.get(f"{V2}/persistent/{NS}/nope-t/messageTTL").status_code == 404
    # enforcement: with TTL 1 s the backlog expires without a restart
    assert http.put(f"{base}/subscription/s", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    produce(client, t, 5)
    deadline = time.monotonic() + 10
    backlog = None
    while time.monotonic() < deadline:
        backlog = http.get(f"{base}/stats").json()["subscriptions"]["s"]["msgBacklog"]
        if backlog == 0:
            break
        time.sleep(0.2)
    assert backlog == 0
    assert http.delete(f"{base}/messageTTL").status_code == 204
    assert http.delete(f"{V2}/namespaces/{NS}/messageTTL").status_code == 204
    # other topic policies round-trip
    assert http.post(f"{base}/maxProducers", json=2).status_code == 204
    assert http.get(f"{base}/maxProducers").json() == 2
    assert (
        http.post(
            f"{base}/retention", json={"retentionTimeInMinutes": 5, "retentionSizeInMB": 10}
        ).status_code
        == 204
    )
    assert http.get(f"{base}/retention").json()["retentionSizeInMB"] == 10
    assert (
        http.post(
            f"{base}/backlogQuota", json={"limitSize": 1000, "policy": "producer_exception"}
        ).status_code
        == 204
    )
    assert http.get(f"{base}/backlogQuotaMap").json()["destination_storage"]["limitSize"] == 1000
    assert (
        http.post(
            f"{base}/persistence", json={"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2}
        ).status_code
        == 400
    )
    assert http.delete(f"{base}?force=true").status_code == 204
