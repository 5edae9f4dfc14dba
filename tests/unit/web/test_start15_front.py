"""``web.front``: the plain-ASGI front answers as the FastAPI app does, and builds the app
once, on the first request that needs it (issue 15 start-up)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx

from magnetar.broker import errors
from magnetar.web.app import create_app
from magnetar.web.front import WebFront


class FakeService:
    """A bare service (no metadata: no admin service), as the web unit tests use."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    async def lookup(self, topic: str) -> dict:
        self.lookups.append(topic)
        if "/missing-ns/" in topic:
            raise errors.NotFoundError("Namespace does not exist")
        return {"brokerUrl": "pulsar://127.0.0.1:6650", "httpUrl": "http://127.0.0.1:8080"}

    def statistics(self) -> dict:
        return {"connections": 3}


def _client(app: object) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://test")


FAST_PATHS = (
    "/lookup/v2/topic/persistent/public/default/t1",
    "/lookup/v2/topic/persistent/public/default/t1?authoritative=true",
    "/lookup/v2/topic/persistent/public/default/t1?authoritative=false",
    "/lookup/v2/topic/bogus/public/default/t1",  # 412 from topic_name
    "/lookup/v2/topic/persistent/public/missing-ns/t1",  # a broker error: its status
    "/admin/v2/brokers/ready",
)


async def test_fast_paths_answer_as_the_app_and_build_nothing() -> None:
    front = WebFront(FakeService())
    async with _client(front) as via_front, _client(create_app(FakeService())) as via_app:
        for path in FAST_PATHS:
            a, b = await via_front.get(path), await via_app.get(path)
            assert (a.status_code, a.headers["content-type"], a.content) == (
                b.status_code,
                b.headers["content-type"],
                b.content,
            ), path
        r = await via_front.get("/metrics")
        assert r.status_code == 200 and "magnetar_broker_connections 3.0" in r.text
        assert r.headers["content-type"].startswith("text/plain")
    assert front.app is None  # none of those needed FastAPI


async def test_other_requests_go_to_the_app_built_once_for_concurrent_first_requests() -> None:
    front = WebFront(FakeService())
    builds = 0
    real_create = front._create

    def counting_create() -> object:
        nonlocal builds
        builds += 1
        return real_create()

    front._create = counting_create  # type: ignore[method-assign]
    async with _client(front) as http:
        answers = await asyncio.gather(*(http.get("/admin/v2/brokers/version") for _ in range(5)))
        assert [r.status_code for r in answers] == [200] * 5
        assert builds == 1 and front.app is not None
        # a name the front refuses to judge goes to the app: its 412
        r = await http.get("/lookup/v2/topic/persistent/bad%20tenant/default/t1")
        assert r.status_code == 412
        r = await http.get("/metrics")  # now through the app, same registry
        assert 'magnetar_http_requests_total{method="GET",status="2xx"} 5.0' in r.text  # counted once each
        assert 'magnetar_http_requests_total{method="GET",status="4xx"} 1.0' in r.text
    assert builds == 1


async def test_a_failed_build_answers_500_and_the_next_request_retries() -> None:
    front = WebFront(FakeService())
    real_create = front._create
    attempts = 0

    def failing_once() -> object:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RuntimeError("boom")
        return real_create()

    front._create = failing_once  # type: ignore[method-assign]
    async with _client(front) as http:
        r = await asyncio.wait_for(http.get("/admin/v2/brokers/version"), 60)
        assert r.status_code == 500 and "boom" in r.json()["reason"]
        assert front.app is None
        r = await http.get("/admin/v2/brokers/version")
        assert r.status_code == 200 and attempts == 2


async def test_with_authentication_on_even_lookups_and_metrics_go_through_the_app() -> None:
    svc = FakeService()
    svc.authentication = SimpleNamespace(enabled=True)  # type: ignore[attr-defined]
    front = WebFront(svc)
    assert not front._fast_paths()
    async with _client(front) as http:
        await http.get("/admin/v2/brokers/ready")  # the app's auth middleware decides (web.auth)
    assert front.app is not None
