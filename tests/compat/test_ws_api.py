"""Pulsar's WebSocket API against a real standalone: a real WebSocket client (``websockets``)
on one side, the official ``pulsar-client`` on the other."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pulsar
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

TIMEOUT_S = 10


def ws_url(standalone, kind: str, topic: str, tail: str = "", **params: object) -> str:
    path = topic.replace("://", "/")
    query = "&".join(f"{k}={v}" for k, v in params.items())
    base = standalone.web_url.replace("http://", "ws://")
    return f"{base}/ws/v2/{kind}/{path}{tail}" + (f"?{query}" if query else "")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def recv(ws) -> dict:
    return json.loads(ws.recv(timeout=TIMEOUT_S))


def test_produce_over_websocket_consume_with_official_client(standalone, client, topic) -> None:
    consumer = client.subscribe(topic, "official")
    with connect(ws_url(standalone, "producer", topic, producerName="ws-prod")) as ws:
        for i in range(5):
            ws.send(
                json.dumps(
                    {
                        "payload": b64(f"m{i}".encode()),
                        "properties": {"i": str(i)},
                        "context": f"c{i}",
                        "key": f"k{i}",
                    }
                )
            )
        acks = [recv(ws) for _ in range(5)]
    assert [a["result"] for a in acks] == ["ok"] * 5
    assert [a["context"] for a in acks] == [f"c{i}" for i in range(5)]
    for i in range(5):
        msg = consumer.receive(timeout_millis=TIMEOUT_S * 1000)
        assert msg.data() == f"m{i}".encode()
        assert msg.properties() == {"i": str(i)}
        assert msg.partition_key() == f"k{i}"
        # The ack's message id is the official client's serialized MessageId.
        assert base64.b64decode(acks[i]["messageId"]) == msg.message_id().serialize()
        consumer.acknowledge(msg)
    consumer.close()


def test_produce_with_official_client_consume_over_websocket(standalone, client, topic) -> None:
    url = ws_url(standalone, "consumer", topic, "/ws-sub", subscriptionType="Exclusive")
    with connect(url) as ws:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
        for i in range(6):
            producer.send_async(f"b{i}".encode(), None, properties={"n": str(i)}, partition_key="pk")
        producer.flush()
        got = [recv(ws) for _ in range(6)]
        assert [base64.b64decode(m["payload"]) for m in got] == [f"b{i}".encode() for i in range(6)]
        assert got[0]["properties"] == {"n": "0"} and got[0]["key"] == "pk"
        assert got[0]["redeliveryCount"] == 0 and got[0]["publishTime"].endswith("Z")
        for m in got:
            ws.send(json.dumps({"messageId": m["messageId"]}))
        producer.close()
    # Everything was acknowledged: nothing left for the subscription.
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        stats = _stats(standalone, topic)
        if stats["subscriptions"]["ws-sub"]["msgBacklog"] == 0:
            break
        time.sleep(0.2)
    assert stats["subscriptions"]["ws-sub"]["msgBacklog"] == 0


def _stats(standalone, topic: str) -> dict:
    import httpx

    path = topic.replace("://", "/")
    return httpx.get(f"{standalone.web_url}/admin/v2/{path}/stats", timeout=TIMEOUT_S).json()


def test_shared_consumers_over_websocket_split_the_messages(standalone, client, topic) -> None:
    url = ws_url(standalone, "consumer", topic, "/shared", subscriptionType="Shared", receiverQueueSize=5)
    with connect(url) as a, connect(url) as b:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(f"s{i}".encode())
        seen: dict[str, list[str]] = {"a": [], "b": []}
        for name, ws in (("a", a), ("b", b)):
            while True:
                try:
                    m = json.loads(ws.recv(timeout=1.5))
                except TimeoutError:
                    break
                seen[name].append(base64.b64decode(m["payload"]).decode())
                ws.send(json.dumps({"messageId": m["messageId"]}))
        producer.close()
    assert sorted(seen["a"] + seen["b"], key=lambda s: int(s[1:])) == [f"s{i}" for i in range(20)]
    assert seen["a"] and seen["b"], seen


def test_push_mode_stops_at_receiver_queue_size_until_acked(standalone, client, topic) -> None:
    url = ws_url(standalone, "consumer", topic, "/q", receiverQueueSize=3)
    with connect(url) as ws:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(6):
            producer.send(f"q{i}".encode())
        first = [recv(ws) for _ in range(3)]
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1.0)
        ws.send(json.dumps({"messageId": first[0]["messageId"]}))
        assert base64.b64decode(recv(ws)["payload"]) == b"q3"
        producer.close()


def test_pull_mode_delivers_only_against_permits(standalone, client, topic) -> None:
    url = ws_url(standalone, "consumer", topic, "/pull", pullMode="true")
    with connect(url) as ws:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(4):
            producer.send(f"p{i}".encode())
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1.0)
        ws.send(json.dumps({"type": "permit", "permitMessages": 2}))
        got = [base64.b64decode(recv(ws)["payload"]) for _ in range(2)]
        assert got == [b"p0", b"p1"]
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.7)
        ws.send(json.dumps({"type": "isEndOfTopic"}))
        assert recv(ws) == {"endOfTopic": False}
        producer.close()


def test_negative_ack_redelivers_and_dead_letter_after_max(standalone, client, topic) -> None:
    dlq = topic + "-dlq"
    dlq_consumer = client.subscribe(dlq, "dlq-watch")
    url = ws_url(
        standalone,
        "consumer",
        topic,
        "/nack",
        subscriptionType="Shared",
        negativeAckRedeliveryDelay=100,
        maxRedeliverCount=1,
        deadLetterTopic=dlq,
    )
    with connect(url) as ws:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"poison")
        for expected_count in (0, 1):
            m = recv(ws)
            assert base64.b64decode(m["payload"]) == b"poison"
            assert m["redeliveryCount"] == expected_count
            ws.send(json.dumps({"type": "negativeAcknowledge", "messageId": m["messageId"]}))
        msg = dlq_consumer.receive(timeout_millis=TIMEOUT_S * 1000)
        assert msg.data() == b"poison"
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1.0)
        producer.close()
    dlq_consumer.close()


def test_ack_timeout_redelivers(standalone, client, topic) -> None:
    url = ws_url(standalone, "consumer", topic, "/at", ackTimeoutMillis=500)
    with connect(url) as ws:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"late")
        assert recv(ws)["redeliveryCount"] == 0
        again = recv(ws)  # not acked within 500 ms
        assert base64.b64decode(again["payload"]) == b"late" and again["redeliveryCount"] == 1
        producer.close()


def test_reader_from_earliest_and_from_a_message_id(standalone, client, topic) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"r{i}".encode()) for i in range(4)]
    with connect(ws_url(standalone, "reader", topic, messageId="earliest")) as ws:
        got = [recv(ws) for _ in range(4)]
        assert [base64.b64decode(m["payload"]) for m in got] == [f"r{i}".encode() for i in range(4)]
        ws.send(json.dumps({"messageId": got[0]["messageId"]}))
    start = b64(ids[1].serialize()).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    with connect(ws_url(standalone, "reader", topic, messageId=start)) as ws:
        assert base64.b64decode(recv(ws)["payload"]) == b"r2"  # exclusive of the start id
    producer.close()


def test_bad_frames_get_pulsar_errors_and_producer_stays_usable(standalone, client, topic) -> None:
    with connect(ws_url(standalone, "producer", topic)) as ws:
        ws.send("{not json")
        bad_json = recv(ws)
        assert bad_json["result"] == "send-error:3"
        ws.send(json.dumps({"payload": "***", "context": "x"}))
        bad_b64 = recv(ws)
        assert bad_b64["result"] == "send-error:7" and bad_b64["context"] == "x"
        ws.send(json.dumps({"payload": b64(b"ok"), "eventTime": "yesterday"}))
        assert recv(ws)["result"] == "send-error:7"
        ws.send(json.dumps({"payload": b64(b"fine"), "context": "y"}))
        ok = recv(ws)
        assert ok["result"] == "ok" and ok["context"] == "y"
    # A consumer closes on unparseable JSON (Pulsar's code 3 in the reason).
    with connect(ws_url(standalone, "consumer", topic, "/bad")) as ws:
        ws.send("][")
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=TIMEOUT_S)
        assert info.value.rcvd is not None and info.value.rcvd.reason.startswith("3:")


def test_unknown_namespace_and_bad_parameters_refuse_the_upgrade(standalone) -> None:
    missing = f"persistent://public/no-such-ns-{uuid.uuid4().hex[:6]}/t"
    with pytest.raises(InvalidStatus) as info:
        connect(ws_url(standalone, "producer", missing))
    assert info.value.response.status_code == 404
    ok_topic = f"persistent://public/default/ws-bad-{uuid.uuid4().hex[:6]}"
    with pytest.raises(InvalidStatus) as info:
        connect(ws_url(standalone, "consumer", ok_topic, "/s", subscriptionType="Bogus"))
    assert info.value.response.status_code == 400
    with pytest.raises(InvalidStatus) as info:
        connect(ws_url(standalone, "producer", ok_topic, sendTimeoutMillis="soon"))
    assert info.value.response.status_code == 400


def test_second_exclusive_consumer_is_refused_with_409(standalone, topic) -> None:
    url = ws_url(standalone, "consumer", topic, "/excl")
    with connect(url):
        with pytest.raises(InvalidStatus) as info:
            connect(url)
        assert info.value.response.status_code == 409


def test_partitioned_topic_over_websocket(standalone, client, topic) -> None:
    import httpx

    path = topic.replace("://", "/")
    r = httpx.put(f"{standalone.web_url}/admin/v2/{path}/partitions", json=3, timeout=TIMEOUT_S)
    assert r.status_code in (200, 204), r.text
    consumer = client.subscribe(topic, "official-p")
    with (
        connect(ws_url(standalone, "consumer", topic, "/ws-p")) as wsc,
        connect(ws_url(standalone, "producer", topic)) as wsp,
    ):
        for i in range(9):
            wsp.send(json.dumps({"payload": b64(f"p{i}".encode()), "key": f"key-{i}"}))
        assert all(recv(wsp)["result"] == "ok" for _ in range(9))
        got = sorted(base64.b64decode(recv(wsc)["payload"]).decode() for _ in range(9))
    assert got == sorted(f"p{i}" for i in range(9))
    official = sorted(consumer.receive(timeout_millis=TIMEOUT_S * 1000).data().decode() for _ in range(9))
    assert official == got
    consumer.close()


def test_pingpong_endpoint_answers_pings(standalone) -> None:
    base = standalone.web_url.replace("http://", "ws://")
    with connect(f"{base}/ws/v2/pingpong") as ws:
        assert ws.ping(b"hi").wait(TIMEOUT_S)


_ = pulsar  # the official client comes from the compat fixtures


def test_is_end_of_topic_true_on_a_terminated_fully_consumed_topic(standalone, client, topic) -> None:
    import httpx

    with connect(ws_url(standalone, "consumer", topic, "/eot")) as ws:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"last")
        producer.close()
        path = topic.replace("://", "/")
        r = httpx.post(f"{standalone.web_url}/admin/v2/{path}/terminate", timeout=TIMEOUT_S)
        assert r.status_code in (200, 204), r.text
        m = recv(ws)
        ws.send(json.dumps({"type": "isEndOfTopic"}))
        assert recv(ws) == {"endOfTopic": False}  # one message not acknowledged yet
        ws.send(json.dumps({"messageId": m["messageId"]}))
        time.sleep(0.3)
        ws.send(json.dumps({"type": "isEndOfTopic"}))
        assert recv(ws) == {"endOfTopic": True}


def test_non_persistent_topic_over_websocket(standalone) -> None:
    topic = f"non-persistent://public/default/ws-np-{uuid.uuid4().hex[:6]}"
    with (
        connect(ws_url(standalone, "consumer", topic, "/np", subscriptionType="Shared")) as wsc,
        connect(ws_url(standalone, "producer", topic)) as wsp,
    ):
        for i in range(3):
            wsp.send(json.dumps({"payload": b64(f"np{i}".encode())}))
            assert recv(wsp)["result"] == "ok"
        got = [base64.b64decode(recv(wsc)["payload"]) for _ in range(3)]
        assert got == [b"np0", b"np1", b"np2"]
