"""Transactions: ``/admin/v3/transactions/...`` (coordinator, buffer and pending-ack stats).

Theory of operation: thin calls, one per REST path (see ``web/transactions.py`` for what
each answers).  Topics are given in any form ``topic_name`` reads and sent as
``{tenant}/{namespace}/{topic}``; transaction ids as ``(most, least)``.
"""

from __future__ import annotations

from typing import Any

from magnetar.admin_client.core import Expect, Resource, call, topic_name

BASE = "/admin/v3/transactions"


def _topic(topic: str) -> str:
    return topic_name(topic).rest_path(include_domain=False)


class Transactions(Resource):
    def coordinator_stats(self, coordinator_id: int | None = None) -> Any:
        return self._run(call("GET", f"{BASE}/coordinatorStats", params={"coordinatorId": coordinator_id}))

    def transaction_metadata(self, most: int, least: int) -> Any:
        return self._run(call("GET", f"{BASE}/transactionMetadata/{int(most)}/{int(least)}"))

    def slow_transactions(self, timeout: str, coordinator_id: int | None = None) -> Any:
        return self._run(
            call("GET", f"{BASE}/slowTransactions/{timeout}", params={"coordinatorId": coordinator_id})
        )

    def transaction_buffer_stats(self, topic: str) -> Any:
        return self._run(call("GET", f"{BASE}/transactionBufferStats/{_topic(topic)}"))

    def transaction_in_buffer_stats(self, topic: str, most: int, least: int) -> Any:
        return self._run(
            call("GET", f"{BASE}/transactionInBufferStats/{_topic(topic)}/{int(most)}/{int(least)}")
        )

    def pending_ack_stats(self, topic: str, subscription: str) -> Any:
        return self._run(call("GET", f"{BASE}/pendingAckStats/{_topic(topic)}/{subscription}"))

    def transaction_in_pending_ack_stats(self, topic: str, subscription: str, most: int, least: int) -> Any:
        path = f"{BASE}/transactionInPendingAckStats/{_topic(topic)}/{subscription}/{int(most)}/{int(least)}"
        return self._run(call("GET", path))

    def abort_transaction(self, most: int, least: int) -> Any:
        return self._run(
            call("POST", f"{BASE}/abortTransaction/{int(most)}/{int(least)}", expect=Expect.NONE)
        )
