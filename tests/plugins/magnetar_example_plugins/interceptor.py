"""A broker interceptor that counts what it sees and refuses producers named ``forbidden-*``."""

from __future__ import annotations

from collections import Counter

from magnetar.broker.errors import NotAllowedError
from magnetar.broker.interceptors import BrokerInterceptor


class CountingInterceptor(BrokerInterceptor):
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.published_topics: set[str] = set()

    def initialize(self, service) -> None:
        service.example_interceptor = self  # the example servlet reports the counts

    def on_connection_created(self, cnx) -> None:
        self.counts["connections"] += 1

    def on_connection_closed(self, cnx) -> None:
        self.counts["connections_closed"] += 1

    def on_pulsar_command(self, command_type, command, cnx) -> None:
        self.counts[f"command:{command_type}"] += 1
        if command_type == "PRODUCER" and command.producer_name.startswith("forbidden-"):
            raise NotAllowedError("producer names starting with forbidden- are refused by the interceptor")

    def on_message_publish(self, producer, headers_and_payload) -> None:
        self.counts["publish"] += 1
        self.published_topics.add(producer.topic.name)

    def on_message_dispatch(self, consumer, ledger_id, entry_id, data) -> None:
        self.counts["dispatch"] += 1

    def on_message_ack(self, consumer, positions, cumulative) -> None:
        self.counts["ack"] += len(positions)

    def on_web_request(self, method, path, headers):
        self.counts["web"] += 1
        return 418 if path.startswith("/teapot") else None


class NoopInterceptor(BrokerInterceptor):
    """Every hook inherited as a no-op: what one configured interceptor costs (e2e_bench --config)."""
