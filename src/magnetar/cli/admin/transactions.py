"""``magnetar admin transactions``: pulsar-admin's ``transactions`` group.

Theory of operation: one leaf per REST path of ``/admin/v3/transactions`` with
pulsar-admin's names and flags (``-c/--coordinator-id``, ``-m/--most-sig-bits``,
``-l/--least-sig-bits``, ``-t/--topic``, ``-s/--sub-name``, ``-t/--time`` for slow
transactions: milliseconds or a number with ms/s/m/h).
"""

from __future__ import annotations

import argparse

from magnetar.cli.admin.common import Ctx, command


def _txn_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-m", "--most-sig-bits", type=int, required=True, help="transaction id: most significant bits"
    )
    p.add_argument(
        "-l", "--least-sig-bits", type=int, required=True, help="transaction id: least significant bits"
    )


def _topic_arg(p: argparse.ArgumentParser, with_sub: bool = False) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name: persistent://tenant/ns/topic")
    if with_sub:
        p.add_argument("-s", "--sub-name", required=True, help="subscription name")


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub, "coordinator-stats", "stats of the transaction coordinators (or one)", _coordinator_stats
    )
    p.add_argument("-c", "--coordinator-id", type=int, help="one coordinator's id")
    p = command(
        sub, "transaction-metadata", "state, partitions and subscriptions of a transaction", _metadata
    )
    _txn_args(p)
    p = command(sub, "slow-transactions", "transactions open longer than a time", _slow)
    p.add_argument("-t", "--time", required=True, help="age: milliseconds, or e.g. 10s, 5m")
    p.add_argument("-c", "--coordinator-id", type=int, help="only this coordinator")
    p = command(sub, "transaction-buffer-stats", "a topic's transaction buffer", _buffer)
    _topic_arg(p)
    p = command(sub, "transaction-in-buffer-stats", "one transaction in a topic's buffer", _in_buffer)
    _topic_arg(p)
    _txn_args(p)
    p = command(sub, "pending-ack-stats", "a subscription's transactional acks", _pending)
    _topic_arg(p, with_sub=True)
    p = command(
        sub, "transaction-in-pending-ack-stats", "one transaction's acks on a subscription", _in_pending
    )
    _topic_arg(p, with_sub=True)
    _txn_args(p)
    p = command(sub, "abort-transaction", "abort an open transaction", _abort)
    _txn_args(p)


def _coordinator_stats(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.transactions.coordinator_stats(a.coordinator_id))


def _metadata(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.transactions.transaction_metadata(a.most_sig_bits, a.least_sig_bits))


def _slow(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.transactions.slow_transactions(a.time, a.coordinator_id))


def _buffer(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.transactions.transaction_buffer_stats(a.topic))


def _in_buffer(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.transactions.transaction_in_buffer_stats(a.topic, a.most_sig_bits, a.least_sig_bits))


def _pending(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(c.admin.transactions.pending_ack_stats(a.topic, a.sub_name))


def _in_pending(c: Ctx, a: argparse.Namespace) -> None:
    c.emit(
        c.admin.transactions.transaction_in_pending_ack_stats(
            a.topic, a.sub_name, a.most_sig_bits, a.least_sig_bits
        )
    )


def _abort(c: Ctx, a: argparse.Namespace) -> None:
    c.admin.transactions.abort_transaction(a.most_sig_bits, a.least_sig_bits)
