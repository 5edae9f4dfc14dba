"""The web layer over a fake service: paths, JSON shapes and Pulsar status codes."""

from __future__ import annotations

import httpx
import pytest

from magnetar.web.app import create_app


class FakeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.http_status = status
        self.message = message


class FakeService:
    def __init__(self) -> None:
        self.partitioned: dict[str, int] = {}
        self.calls: list[tuple] = []

    async def lookup(self, topic: str) -> dict:
        self.calls.append(("lookup", topic))
        if "/missing-ns/" in topic:
            raise FakeError(404, "Namespace does not exist")
        return {"brokerUrl": "pulsar://127.0.0.1:6650", "httpUrl": "http://127.0.0.1:8080"}

    async def get_partitioned_metadata(self, topic: str, check_allow_auto_creation: bool = False) -> int:
        self.calls.append(("pm", topic, check_allow_auto_creation))
        return self.partitioned.get(topic, 0)

    async def create_partitioned_topic(self, topic: str, n: int) -> None:
        if topic in self.partitioned:
            raise FakeError(409, "Partitioned topic already exist")
        if n <= 0:
            raise FakeError(406, "The number of partitions must be more than 0")
        self.partitioned[topic] = n

    async def list_topics(self, namespace: str, mode: str = "PERSISTENT") -> list[str]:
        self.calls.append(("list", namespace, mode))
        return [f"persistent://{namespace}/a"]

    def statistics(self) -> dict:
        return {"connections": 3, "topics": 2, "nested": {"producerCount": 1}}


@pytest.fixture
def svc() -> FakeService:
    return FakeService()


@pytest.fixture
async def http(svc: FakeService):
    app = create_app(svc)
    # errors from the fake carry http_status; install them like broker errors
    from magnetar.web.errors import reason

    async def on_fake(_r, exc):
        return reason(exc.http_status, exc.message)

    app.add_exception_handler(FakeError, on_fake)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


async def test_lookup_has_every_key_the_cpp_client_parses(http, svc):
    r = await http.get("/lookup/v2/topic/persistent/public/default/my-topic")
    assert r.status_code == 200
    body = r.json()
    assert body["brokerUrl"] == "pulsar://127.0.0.1:6650"
    assert "brokerUrlTls" in body and body["brokerUrlTls"] is None
    assert body["nativeUrl"] == "pulsar://127.0.0.1:6650"
    assert "httpUrlTls" in body
    assert svc.calls[-1] == ("lookup", "persistent://public/default/my-topic")


async def test_lookup_error_is_reason_json_with_status(http):
    r = await http.get("/lookup/v2/topic/persistent/public/missing-ns/t")
    assert r.status_code == 404
    assert r.json() == {"reason": "Namespace does not exist"}


async def test_invalid_domain_is_412(http):
    r = await http.get("/lookup/v2/topic/bogus/public/default/t")
    assert r.status_code == 412
    assert "domain" in r.json()["reason"]


async def test_partitions_put_then_get_then_conflict(http, svc):
    path = "/admin/v2/persistent/public/default/pt/partitions"
    r = await http.put(path, content=b"3", headers={"content-type": "application/json"})
    assert r.status_code == 204 and r.content == b""
    r = await http.get(path, params={"checkAllowAutoCreation": "true"})
    assert r.json() == {"partitions": 3}
    assert svc.calls[-1] == ("pm", "persistent://public/default/pt", True)
    r = await http.put(path, content=b"3")
    assert r.status_code == 409 and r.json()["reason"]


async def test_partitions_put_accepts_object_body_and_rejects_garbage(http, svc):
    path = "/admin/v2/persistent/public/default/po/partitions"
    r = await http.put(path, json={"partitions": 2, "properties": {}})
    assert r.status_code == 204
    assert svc.partitioned["persistent://public/default/po"] == 2
    r = await http.put("/admin/v2/persistent/public/default/px/partitions", content=b"abc")
    assert r.status_code == 400 and "integer" in r.json()["reason"]
    r = await http.put("/admin/v2/persistent/public/default/py/partitions", content=b"0")
    assert r.status_code == 406


async def test_absent_topic_has_zero_partitions(http):
    r = await http.get("/admin/v2/non-persistent/public/default/nothing/partitions")
    assert r.status_code == 200 and r.json() == {"partitions": 0}


async def test_namespace_topics_mode(http, svc):
    r = await http.get("/admin/v2/namespaces/public/default/topics", params={"mode": "ALL"})
    assert r.json() == ["persistent://public/default/a"]
    assert svc.calls[-1] == ("list", "public/default", "ALL")
    r = await http.get("/admin/v2/namespaces/public/default/topics", params={"mode": "WHATEVER"})
    assert r.status_code == 400


async def test_schema_absent_is_404_reason(http):
    r = await http.get("/admin/v2/schemas/public/default/t/schema")
    assert r.status_code == 404 and r.json() == {"reason": "Schema not found"}


async def test_health_ok_and_metrics_count_requests(http):
    r = await http.get("/admin/v2/brokers/health")
    assert r.status_code == 200 and r.text == "ok"
    r = await http.get("/metrics")
    assert r.status_code == 200
    text = r.text
    assert 'magnetar_http_requests_total{method="GET",status="2xx"} 1.0' in text
    assert "magnetar_broker_connections 3.0" in text
    assert "magnetar_broker_nested_producer_count 1.0" in text


async def test_unknown_path_is_404_reason(http):
    r = await http.get("/admin/v2/nothing-here")
    assert r.status_code == 404 and "reason" in r.json()


async def test_real_broker_errors_become_reason_json_with_their_status():
    from magnetar.broker import errors

    class Raising(FakeService):
        async def lookup(self, topic: str) -> dict:
            raise errors.NamespaceNotFoundError("Namespace public/nope does not exist")

        async def create_partitioned_topic(self, topic: str, n: int) -> None:
            raise errors.AlreadyExistsError("Partitioned topic already exist")

    app = create_app(Raising())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        r = await http.get("/lookup/v2/topic/persistent/public/nope/t")
        assert r.status_code == errors.NamespaceNotFoundError.http_status == 404
        assert r.json() == {"reason": "Namespace public/nope does not exist"}
        r = await http.put("/admin/v2/persistent/public/default/t/partitions", content=b"2")
        assert r.status_code == 409 and r.json()["reason"] == "Partitioned topic already exist"


async def test_health_uses_the_injected_check_and_reports_its_failure():
    calls = []

    async def failing() -> None:
        calls.append(1)
        raise RuntimeError("no round trip through the health topic")

    app = create_app(FakeService(), health_check=failing)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        r = await http.get("/admin/v2/brokers/health")
    assert calls == [1]
    assert r.status_code == 500
    assert r.json() == {"reason": "health check failed: no round trip through the health topic"}
