"""Topic lists for regex consumers, command by command (magnetar's sans-IO codec against an
in-process standalone): GET_TOPICS_OF_NAMESPACE with pattern and hash, and topic-list
watchers (WATCH_TOPIC_LIST / WATCH_TOPIC_UPDATE / WATCH_TOPIC_LIST_CLOSE), with
``enableBrokerSideSubscriptionPatternEvaluation`` on and off.
"""

from __future__ import annotations

import asyncio

import crc32c
import pytest

from magnetar.app.healthcheck import _Session
from magnetar.broker.service.topic_list import topics_hash
from magnetar.protocol import client_commands as cc
from magnetar.protocol.enums import CommandType, ServerError
from magnetar.protocol.events import CommandReceived, Connected, ResponseReceived
from magnetar.testing.standalone import broker_unavailable_reason, running_standalone

NS = "public/default"
TIMEOUT_S = 10


def test_topics_hash_is_pulsars() -> None:
    # CRC32-C test vector 0xE3069283, written little-endian as Guava's HashCode.toString does
    assert topics_hash(["123456789"]) == "839206e3"
    assert topics_hash([]) == "00000000"
    names = ["persistent://public/default/b", "persistent://public/default/a"]
    expected = crc32c.crc32c(b"persistent://public/default/a,persistent://public/default/b")
    assert topics_hash(names) == expected.to_bytes(4, "little").hex()
    assert topics_hash(names) == topics_hash(list(reversed(names)))  # order does not matter


class Wire:
    def __init__(self, session: _Session, connected: Connected) -> None:
        self.s = session
        self.connected = connected
        self.unsolicited: list[CommandReceived] = []

    async def ask(self, kind: CommandType, build) -> ResponseReceived:  # type: ignore[no-untyped-def]
        rid = self.s.conn.new_request_id()
        self.s.writer.write(self.s.conn.send_request(kind, rid, build(rid)))
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                event = await self.s.next_event()
                if isinstance(event, ResponseReceived) and event.request_id == rid and event.final:
                    return event
                if isinstance(event, CommandReceived):
                    self.unsolicited.append(event)

    async def next_update(self, timeout_s: float) -> CommandReceived | None:
        if self.unsolicited:
            return self.unsolicited.pop(0)
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    event = await self.s.next_event()
                    if isinstance(event, CommandReceived) and event.type is CommandType.WATCH_TOPIC_UPDATE:
                        return event
        except TimeoutError:
            return None


async def _open(port: int) -> Wire:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    s = _Session(reader, writer)
    writer.write(s.conn.connect(client_version="brokerfix-test", supports_topic_watchers=True))
    event = await asyncio.wait_for(s.next_event(), TIMEOUT_S)
    assert isinstance(event, Connected)
    return Wire(s, event)


async def _create(svc, name: str) -> None:  # type: ignore[no-untyped-def]
    await svc.create_non_partitioned_topic(name)


@pytest.fixture
async def standalone(tmp_path, request):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    props = getattr(request, "param", {})
    async with running_standalone(tmp_path / "data", props) as s:
        yield s


async def test_get_topics_of_namespace_pattern_and_hash(standalone) -> None:
    svc = standalone.broker_service
    for local in ("gt-a", "gt-b", "other-c"):
        await _create(svc, f"persistent://{NS}/{local}")
    w = await _open(standalone.broker_port)
    r = await w.ask(CommandType.GET_TOPICS_OF_NAMESPACE, lambda rid: cc.get_topics_of_namespace(rid, NS))
    everything = list(r.frame.command.topics)
    assert {f"persistent://{NS}/{x}" for x in ("gt-a", "gt-b", "other-c")} <= set(everything)
    assert not r.frame.command.filtered
    assert r.frame.command.topics_hash == topics_hash(everything)

    def filtered(rid: int, h: str | None = None) -> bytes:
        return cc.get_topics_of_namespace(rid, NS, topics_pattern=f"persistent://{NS}/gt-.*", topics_hash=h)

    r = await w.ask(CommandType.GET_TOPICS_OF_NAMESPACE, filtered)
    cmd = r.frame.command
    assert sorted(cmd.topics) == [f"persistent://{NS}/gt-a", f"persistent://{NS}/gt-b"]
    assert cmd.filtered and cmd.changed
    assert cmd.topics_hash == topics_hash(list(cmd.topics))
    same = await w.ask(CommandType.GET_TOPICS_OF_NAMESPACE, lambda rid: filtered(rid, cmd.topics_hash))
    assert not same.frame.command.changed and list(same.frame.command.topics) == []
    await _create(svc, f"persistent://{NS}/gt-new")
    moved = await w.ask(CommandType.GET_TOPICS_OF_NAMESPACE, lambda rid: filtered(rid, cmd.topics_hash))
    assert moved.frame.command.changed and f"persistent://{NS}/gt-new" in moved.frame.command.topics
    w.s.writer.close()


async def test_topic_list_watcher(standalone) -> None:
    svc = standalone.broker_service
    await _create(svc, f"persistent://{NS}/wt-a")
    await _create(svc, f"persistent://{NS}/zz-nomatch")
    w = await _open(standalone.broker_port)
    assert "supports_topic_watchers" in w.connected.feature_flags
    r = await w.ask(
        CommandType.WATCH_TOPIC_LIST,
        lambda rid: cc.watch_topic_list(rid, 7, NS, f"persistent://{NS}/wt-.*"),
    )
    assert not r.is_error, r.frame.command
    ok = r.frame.command
    assert ok.watcher_id == 7 and list(ok.topic) == [f"persistent://{NS}/wt-a"]
    assert ok.topics_hash == topics_hash([f"persistent://{NS}/wt-a"])

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await _create(svc, f"persistent://{NS}/wt-b")
    await _create(svc, f"persistent://{NS}/zz-nomatch-2")  # no update for a topic that does not match
    update = await w.next_update(5)
    assert update is not None, "no WATCH_TOPIC_UPDATE within 5 s of a matching topic's creation"
    assert loop.time() - t0 < 3
    u = update.frame.command
    assert u.watcher_id == 7 and list(u.new_topics) == [f"persistent://{NS}/wt-b"] and not u.deleted_topics
    assert u.topics_hash == topics_hash([f"persistent://{NS}/wt-a", f"persistent://{NS}/wt-b"])
    assert await w.next_update(1.5) is None  # nothing for the non-matching topic

    await svc.delete_topic(f"persistent://{NS}/wt-a")
    update = await w.next_update(5)
    assert update is not None and list(update.frame.command.deleted_topics) == [f"persistent://{NS}/wt-a"]
    assert update.frame.command.topics_hash == topics_hash([f"persistent://{NS}/wt-b"])

    # a reconnecting watcher that already holds the current list gets no topics, only the hash
    again = await w.ask(
        CommandType.WATCH_TOPIC_LIST,
        lambda rid: cc.watch_topic_list(
            rid, 8, NS, f"persistent://{NS}/wt-.*", topics_hash([f"persistent://{NS}/wt-b"])
        ),
    )
    assert list(again.frame.command.topic) == []

    closed = await w.ask(CommandType.WATCH_TOPIC_LIST_CLOSE, lambda rid: cc.watch_topic_list_close(rid, 7))
    assert not closed.is_error
    await w.ask(CommandType.WATCH_TOPIC_LIST_CLOSE, lambda rid: cc.watch_topic_list_close(rid, 8))
    await _create(svc, f"persistent://{NS}/wt-c")
    assert await w.next_update(2) is None  # closed watchers hear nothing
    w.s.writer.close()


@pytest.mark.parametrize(
    "standalone", [{"enableBrokerSideSubscriptionPatternEvaluation": "false"}], indirect=True
)
async def test_watchers_off(standalone) -> None:
    svc = standalone.broker_service
    await _create(svc, f"persistent://{NS}/off-a")
    w = await _open(standalone.broker_port)
    assert "supports_topic_watchers" not in w.connected.feature_flags
    r = await w.ask(
        CommandType.WATCH_TOPIC_LIST, lambda rid: cc.watch_topic_list(rid, 1, NS, f"persistent://{NS}/off-.*")
    )
    assert r.is_error and r.frame.command.error == ServerError.NotAllowedError
    # polling still works, unfiltered (the client filters)
    r = await w.ask(
        CommandType.GET_TOPICS_OF_NAMESPACE,
        lambda rid: cc.get_topics_of_namespace(rid, NS, topics_pattern=f"persistent://{NS}/nothing-.*"),
    )
    assert not r.frame.command.filtered and f"persistent://{NS}/off-a" in r.frame.command.topics
    w.s.writer.close()
