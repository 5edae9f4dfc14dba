"""Transaction commands: TC_CLIENT_CONNECT, NEW_TXN, ADD_PARTITION_TO_TXN,
ADD_SUBSCRIPTION_TO_TXN, END_TXN, END_TXN_ON_PARTITION, END_TXN_ON_SUBSCRIPTION.

Theory of operation: each handler finds the coordinator named by the request (``tc_id``,
or the high bits of the transaction id) through ``BrokerService.transactions`` and answers
with the command's own response type -- an error too travels in that response
(``error`` + ``message``), because the clients route failures of transaction requests by
response type, not through CommandError.  When ``transactionCoordinatorEnabled`` is false
every command is answered NotAllowedError.  The ``*_ON_PARTITION`` / ``*_ON_SUBSCRIPTION``
commands (coordinator -> owning broker) end the transaction on this broker's topic or
subscription, exactly as the local coordinator does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.transaction.errors import TransactionsDisabledError
from magnetar.broker.transaction.model import TxnID
from magnetar.broker.transaction.service import TransactionService
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import TxnAction

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection

log = logging.getLogger(__name__)


def _service(cnx: Connection) -> TransactionService:
    txns = cnx.service.transactions
    if txns is None:
        raise TransactionsDisabledError()
    return txns


def _txnid(cmd: Any) -> TxnID:
    return TxnID(cmd.txnid_most_bits, cmd.txnid_least_bits)


async def _answer(
    cnx: Connection, frame: Any, response: T, work: Callable[[], Awaitable[None]], with_txn: bool = True
) -> None:
    cmd = frame.command
    try:
        await work()
    except Exception as exc:
        err = errors.translate(exc)
        if not isinstance(exc, errors.BrokerError):
            log.warning("%s failed", frame.type.name, exc_info=True)
        ids = (
            {"txnid_least_bits": cmd.txnid_least_bits, "txnid_most_bits": cmd.txnid_most_bits}
            if with_txn
            else {}
        )
        if response is T.TC_CLIENT_CONNECT_RESPONSE:
            cnx.write(cmds.tc_client_connect_response(cmd.request_id, int(err.server_error), err.message))
        elif response is T.NEW_TXN_RESPONSE:
            cnx.write(cmds.new_txn_response(cmd.request_id, error=int(err.server_error), message=err.message))
        else:
            cnx.write(
                cmds.txn_op_response(
                    response, cmd.request_id, error=int(err.server_error), message=err.message, **ids
                )
            )
        return
    if response is T.TC_CLIENT_CONNECT_RESPONSE or response is T.NEW_TXN_RESPONSE:
        return  # answered by the work itself
    cnx.write(cmds.txn_op_response(response, cmd.request_id, cmd.txnid_least_bits, cmd.txnid_most_bits))


async def handle_tc_client_connect(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        await _service(cnx).coordinator(cmd.tc_id)
        cnx.write(cmds.tc_client_connect_response(cmd.request_id))

    await _answer(cnx, frame, T.TC_CLIENT_CONNECT_RESPONSE, work, with_txn=False)


async def handle_new_txn(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        tc = await _service(cnx).coordinator(cmd.tc_id)
        txnid = await tc.new_txn(cmd.txn_ttl_seconds)  # milliseconds, despite the name
        cnx.write(cmds.new_txn_response(cmd.request_id, txnid.least, txnid.most))

    await _answer(cnx, frame, T.NEW_TXN_RESPONSE, work, with_txn=False)


async def handle_add_partition(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        txnid = _txnid(cmd)
        tc = await _service(cnx).coordinator(txnid.most)
        await tc.add_partitions(txnid, list(cmd.partitions))

    await _answer(cnx, frame, T.ADD_PARTITION_TO_TXN_RESPONSE, work)


async def handle_add_subscription(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        txnid = _txnid(cmd)
        tc = await _service(cnx).coordinator(txnid.most)
        await tc.add_subscriptions(txnid, [(s.topic, s.subscription) for s in cmd.subscription])

    await _answer(cnx, frame, T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, work)


async def handle_end_txn(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        txnid = _txnid(cmd)
        tc = await _service(cnx).coordinator(txnid.most)
        await tc.end(txnid, cmd.txn_action == TxnAction.COMMIT)

    await _answer(cnx, frame, T.END_TXN_RESPONSE, work)


async def handle_end_txn_on_partition(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        await _service(cnx).end_partition(cmd.topic, _txnid(cmd), cmd.txn_action == TxnAction.COMMIT)

    await _answer(cnx, frame, T.END_TXN_ON_PARTITION_RESPONSE, work)


async def handle_end_txn_on_subscription(cnx: Connection, frame: Any) -> None:
    cmd = frame.command

    async def work() -> None:
        sub = cmd.subscription
        await _service(cnx).end_subscription(
            sub.topic, sub.subscription, _txnid(cmd), cmd.txn_action == TxnAction.COMMIT
        )

    await _answer(cnx, frame, T.END_TXN_ON_SUBSCRIPTION_RESPONSE, work)


TXN_HANDLERS = {
    T.TC_CLIENT_CONNECT_REQUEST: handle_tc_client_connect,
    T.NEW_TXN: handle_new_txn,
    T.ADD_PARTITION_TO_TXN: handle_add_partition,
    T.ADD_SUBSCRIPTION_TO_TXN: handle_add_subscription,
    T.END_TXN: handle_end_txn,
    T.END_TXN_ON_PARTITION: handle_end_txn_on_partition,
    T.END_TXN_ON_SUBSCRIPTION: handle_end_txn_on_subscription,
}
