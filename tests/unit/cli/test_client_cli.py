"""``magnetar client produce|consume|read``: flags, output format and loops, with a fake client object.

The client is an async fake with magnetar.client's method names, so no broker
is needed; runs against a real broker are in test_client_cli_real.py.
"""

from __future__ import annotations

import asyncio
import io
import sys

import pytest

from magnetar.cli import client as client_cli
from magnetar.cli.main import build_parser, main
from magnetar.client import EARLIEST, Timeout


class FakeProducer:
    def __init__(self, sent: list) -> None:
        self.sent = sent
        self.closed = False

    async def send_async(self, payload, **kwargs):
        self.sent.append((payload, kwargs))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    async def close(self):
        self.closed = True


class FakeMessage:
    def __init__(self, data: bytes, key: str = "", props: dict | None = None) -> None:
        self._data, self._key, self._props = data, key, props or {}

    def data(self):
        return self._data

    def partition_key(self):
        return self._key

    def properties(self):
        return self._props

    def message_id(self):
        return "1:2:-1"

    def publish_timestamp(self):
        return 1700000000000

    def event_timestamp(self):
        return 0


class FakeConsumer:
    def __init__(self, messages: list) -> None:
        self.messages = list(messages)
        self.acked: list = []
        self.polls = 0

    async def receive(self, timeout_millis=None):
        self.polls += 1
        if not self.messages:
            await asyncio.sleep(0.001)
            raise Timeout("no message")
        return self.messages.pop(0)

    read_next = receive

    async def acknowledge(self, msg):
        self.acked.append(msg)

    async def close(self):
        pass


class FakeClient:
    def __init__(self, messages: list | None = None) -> None:
        self.sent: list = []
        self.producer_kwargs: dict = {}
        self.subscribe_args: tuple = ()
        self.consumer = FakeConsumer(messages or [])

    async def create_producer(self, topic, **kwargs):
        self.producer_kwargs = {"topic": topic, **kwargs}
        return FakeProducer(self.sent)

    async def subscribe(self, topic, sub, **kwargs):
        self.subscribe_args = (topic, sub, kwargs)
        return self.consumer

    async def create_reader(self, topic, start, **kwargs):
        self.subscribe_args = (topic, start, kwargs)
        return self.consumer


def _args(*argv: str):
    return build_parser().parse_args(["client", *argv])


def _run(coro):
    return asyncio.run(coro)


def test_produce_splits_messages_repeats_and_sets_key_and_properties():
    fake = FakeClient()
    out = io.StringIO()
    args = _args("produce", "my-topic", "-m", "a,b", "-m", "c", "-n", "2", "-k", "k1", "-p", "x=1,y=2")
    assert _run(client_cli.produce(fake, args, out)) == 0
    assert [p for p, _ in fake.sent] == [b"a", b"b", b"c"] * 2
    assert fake.sent[0][1] == {"properties": {"x": "1", "y": "2"}, "partition_key": "k1"}
    assert fake.producer_kwargs == {"topic": "my-topic", "batching_enabled": True, "chunking_enabled": False}
    assert out.getvalue().strip() == "6 messages successfully produced"


def test_produce_files_separator_and_bounds(tmp_path):
    f = tmp_path / "blob.bin"
    f.write_bytes(b"\x00\x01binary")
    fake = FakeClient()
    args = _args("produce", "t", "-f", str(f), "-m", "a|b", "-s", "|", "-db")
    assert _run(client_cli.produce(fake, args, io.StringIO())) == 0
    assert [p for p, _ in fake.sent] == [b"a", b"b", b"\x00\x01binary"]
    assert fake.producer_kwargs["batching_enabled"] is False
    with pytest.raises(client_cli.ClientCliError):
        _run(client_cli.produce(FakeClient(), _args("produce", "t", "-m", "x", "-n", "1001"), io.StringIO()))
    with pytest.raises(client_cli.ClientCliError):
        _run(client_cli.produce(FakeClient(), _args("produce", "t"), io.StringIO()))
    with pytest.raises(client_cli.ClientCliError):
        _run(
            client_cli.produce(FakeClient(), _args("produce", "t", "-m", "x", "-p", "novalue"), io.StringIO())
        )


def test_produce_rate_paces_sends(monkeypatch):
    now = [100.0]
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    monkeypatch.setattr(client_cli.asyncio, "sleep", sleep)
    monkeypatch.setattr(client_cli.time, "monotonic", lambda: now[0])
    _run(client_cli.produce(FakeClient(), _args("produce", "t", "-m", "a,b,c,d", "-r", "10"), io.StringIO()))
    assert sleeps == pytest.approx([0.1, 0.1, 0.1])  # 4 sends at 10/s: 3 gaps of 100 ms


def test_consume_prints_like_pulsar_client_and_acks():
    msgs = [FakeMessage(b"hello", "mykey", {"a": "1", "b": "2"}), FakeMessage(b"world")]
    fake = FakeClient(msgs)
    out = io.StringIO()
    args = _args("consume", "t", "-s", "sub", "-t", "key_shared", "-p", "Earliest", "-n", "2")
    assert _run(client_cli.consume(fake, args, out)) == 0
    assert out.getvalue().splitlines() == [
        "----- got message -----",
        "key:[mykey], properties:[a=1, b=2], content:hello",
        "----- got message -----",
        "key:[null], content:world",
        "2 messages successfully consumed",
    ]
    topic, sub, kwargs = fake.subscribe_args
    assert (topic, sub) == ("t", "sub")
    assert kwargs["consumer_type"] == "KeyShared"
    assert kwargs["initial_position"] == "Earliest"
    assert fake.consumer.acked == msgs


def test_consume_gives_up_after_timeout_without_messages():
    fake = FakeClient([FakeMessage(b"only")])
    out = io.StringIO()
    args = _args("consume", "t", "-s", "sub", "-n", "3", "--timeout", "0.01")
    assert _run(client_cli.consume(fake, args, out)) == 1  # fewer than asked
    assert out.getvalue().splitlines()[-1] == "1 messages successfully consumed"


def test_consume_rejects_unknown_type():
    with pytest.raises(client_cli.ClientCliError):
        _run(client_cli.consume(FakeClient(), _args("consume", "t", "-s", "s", "-t", "Bogus"), io.StringIO()))


def test_read_from_earliest_and_hex():
    fake = FakeClient([FakeMessage(b"\x01\x02")])
    out = io.StringIO()
    assert _run(client_cli.read_messages(fake, _args("read", "t", "-m", "earliest", "--hex"), out)) == 0
    assert "content:01 02" in out.getvalue() and "1 messages successfully read" in out.getvalue()
    assert fake.subscribe_args[1] == EARLIEST


def test_runs_without_the_official_client(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pulsar", None)  # import pulsar now raises ImportError
    # nothing listens on port 1: the native client itself reports the connection failure
    assert main(["client", "--url", "pulsar://127.0.0.1:1", "produce", "t", "-m", "x"]) == 1
    err = capsys.readouterr().err
    assert "ConnectError" in err and "pip install" not in err


def test_client_help_texts():
    parser = build_parser()._subparsers._group_actions[0].choices["client"]
    sub = parser._subparsers._group_actions[0]
    for name, p in sub.choices.items():
        assert p.description
        for action in p._actions:
            assert action.help, f"client {name} {action.option_strings or action.dest}"
