"""A topic in a tenant or namespace that does not exist is TopicNotFound, everywhere.

Binary lookup, partitioned metadata, PRODUCER and SUBSCRIBE (through the official
client and, command by command, through magnetar's sans-IO codec) and HTTP lookup --
with authorization off, and on with the anonymous role: never AuthorizationError for a
namespace that does not exist (while an existing namespace without grants still is one).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pulsar
import pytest

from magnetar.app.healthcheck import _Session
from magnetar.protocol import client_commands as cc
from magnetar.protocol.enums import CommandType, ServerError, SubType
from magnetar.protocol.events import ResponseReceived
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

SECRET = b"brokerfix-missing-ns-secret-0123456789"
MISSING = (
    "persistent://no-such-tenant/ns/t",  # the tenant does not exist
    "persistent://public/no-such-ns/t",  # the tenant does, the namespace does not
)


@pytest.fixture(scope="module", params=["open", "authorization"])
def broker(request, tmp_path_factory) -> Iterator[StandaloneProcess]:
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp(f"missing-ns-{request.param}")
    conf = base / "standalone.conf"
    lines = ["brokerDeleteInactiveTopicsEnabled=false"]
    if request.param == "authorization":
        (base / "secret.key").write_bytes(SECRET)
        lines += [
            "authenticationEnabled=true",
            "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            f"tokenSecretKey=file://{base / 'secret.key'}",
            "authorizationEnabled=true",
            "superUserRoles=admin",
            "anonymousUserRole=anon",
        ]
    conf.write_text("\n".join(lines) + "\n")
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    proc.secured = request.param == "authorization"  # type: ignore[attr-defined]
    yield proc
    assert proc.terminate() == 0, proc.log_tail()


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=5, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


@pytest.mark.parametrize("topic", MISSING)
def test_official_client_gets_topic_not_found(broker, topic: str) -> None:
    c = _client(broker.broker_url)
    try:
        with pytest.raises(pulsar.TopicNotFound):
            c.create_producer(topic)
        with pytest.raises(pulsar.TopicNotFound):
            c.subscribe(topic, "s")
        with pytest.raises(pulsar.TopicNotFound):
            c.get_topic_partitions(topic)
    finally:
        c.close()


@pytest.mark.parametrize("topic", MISSING)
def test_official_client_over_http_lookup(broker, topic: str) -> None:
    """The cpp client's HTTP lookup turns any HTTP error into ConnectError; what matters is
    that it is not an authorization failure (the broker answers 404, next test)."""
    c = _client(broker.web_url)
    try:
        with pytest.raises((pulsar.TopicNotFound, pulsar.ConnectError)):
            c.create_producer(topic)
        with pytest.raises((pulsar.TopicNotFound, pulsar.ConnectError)):
            c.subscribe(topic, "s")
    finally:
        c.close()


def test_existing_namespace_without_grants_is_still_refused(broker) -> None:
    if not broker.secured:
        pytest.skip("authorization is off in this broker")
    c = _client(broker.broker_url)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer(f"persistent://public/default/no-grants-{uuid.uuid4().hex[:6]}")
    finally:
        c.close()


@pytest.mark.parametrize("topic", MISSING)
def test_http_lookup_and_partitions_are_404(broker, topic: str) -> None:
    path = topic.replace("://", "/")
    for url in (
        f"{broker.web_url}/lookup/v2/topic/{path}",
        f"{broker.web_url}/admin/v2/{path}/partitions?checkAllowAutoCreation=true",
    ):
        r = httpx.get(url, timeout=10)
        assert r.status_code == 404, (url, r.status_code, r.text)


async def _each_command(port: int, topic: str) -> dict[str, tuple[int, str]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    s = _Session(reader, writer)
    await asyncio.wait_for(s.handshake(), 10)
    builders = {
        "LOOKUP": (CommandType.LOOKUP, lambda rid: cc.lookup(topic, rid)),
        "PARTITIONED_METADATA": (
            CommandType.PARTITIONED_METADATA,
            lambda rid: cc.partitioned_metadata(topic, rid),
        ),
        "PRODUCER": (CommandType.PRODUCER, lambda rid: cc.producer(topic, 1, rid)),
        "SUBSCRIBE": (CommandType.SUBSCRIBE, lambda rid: cc.subscribe(topic, "s", SubType.Exclusive, 1, rid)),
    }
    answers: dict[str, tuple[int, str]] = {}
    try:
        for name, (kind, build) in builders.items():
            rid = s.conn.new_request_id()
            writer.write(s.conn.send_request(kind, rid, build(rid)))
            async with asyncio.timeout(10):
                while True:
                    event = await s.next_event()
                    if isinstance(event, ResponseReceived) and event.request_id == rid and event.final:
                        break
            cmd = event.frame.command
            assert event.is_error, f"{name} on {topic} succeeded"
            code = (
                cmd.error if cmd.HasField("error") else cmd.error_code if hasattr(cmd, "error_code") else -1
            )
            answers[name] = (code, getattr(cmd, "message", "") or getattr(cmd, "error_message", ""))
    finally:
        writer.close()
    return answers


@pytest.mark.parametrize("topic", MISSING)
def test_each_command_answers_topic_not_found(broker, topic: str) -> None:
    answers = asyncio.run(_each_command(int(broker.broker_url.rsplit(":", 1)[1]), topic))
    for name, (code, message) in answers.items():
        assert code == ServerError.TopicNotFound, f"{name}: {code} {message}"
