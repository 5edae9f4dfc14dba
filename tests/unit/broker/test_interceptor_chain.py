"""InterceptorChain: only overriding interceptors are called, failures are contained, commands
can be refused."""

from __future__ import annotations

import pytest

from magnetar.broker.errors import NotAllowedError
from magnetar.broker.interceptors import BrokerInterceptor, InterceptorChain


class Recording(BrokerInterceptor):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_message_publish(self, producer, headers_and_payload) -> None:
        self.seen.append("publish")

    def on_pulsar_command(self, command_type, command, cnx) -> None:
        if command_type == "PRODUCER":
            raise NotAllowedError("no producers")


class Faulty(BrokerInterceptor):
    def on_message_publish(self, producer, headers_and_payload) -> None:
        raise RuntimeError("bug in a plugin")

    def on_web_request(self, method, path, headers):
        return 451 if path == "/x" else None


def test_only_overriding_interceptors_are_listed_per_hook() -> None:
    chain = InterceptorChain([("noop", BrokerInterceptor()), ("rec", Recording())])
    assert [n for n, _ in chain._by_hook["on_message_publish"]] == ["rec"]
    assert chain._by_hook["on_message_dispatch"] == ()


def test_failures_are_contained_and_commands_can_be_refused() -> None:
    rec = Recording()
    chain = InterceptorChain([("faulty", Faulty()), ("rec", rec)])
    chain.on_message_publish(None, b"")  # Faulty raises: logged, the next one still runs
    assert rec.seen == ["publish"]
    with pytest.raises(NotAllowedError):
        chain.on_pulsar_command("PRODUCER", None, None)
    chain.on_pulsar_command("SUBSCRIBE", None, None)
    assert chain.on_web_request("GET", "/x", {}) == 451
    assert chain.on_web_request("GET", "/y", {}) is None
