"""RemoteParticipants: END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION to another broker.

Theory of operation: when the topic of a participant is owned by another broker (the lookup
names another broker URL), the coordinator sends the end of the transaction there over the
binary protocol, as Pulsar's TransactionBufferClient does: one short connection per call
(CONNECT, the request, its response, close) through the sans-IO ``protocol.ClientConnection``
-- the broker does not use ``magnetar.client``.  The answer's ``error`` becomes the broker
error of that code; any failure raises, and the coordinator retries the end with back-off.
Authentication between brokers (``brokerClientAuthenticationPlugin``) is not applied yet:
this works between brokers that do not require it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from magnetar.broker import errors
from magnetar.broker.transaction.model import TxnID
from magnetar.protocol import client_commands
from magnetar.protocol.client_connection import ClientConnection
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import ServerError, TxnAction
from magnetar.protocol.events import (
    Connected,
    ConnectionClosed,
    ConnectRejected,
    PingReceived,
    ResponseReceived,
)
from magnetar.runtime import Clock, wait_for

REQUEST_TIMEOUT_S = 10.0
READ_BYTES = 64 * 1024
CLIENT_VERSION = "magnetar-broker-txn"


class RemoteParticipants:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def end_partition(self, broker_url: str, topic: str, txnid: TxnID, commit: bool) -> None:
        action = TxnAction.COMMIT if commit else TxnAction.ABORT
        await self._call(
            broker_url,
            T.END_TXN_ON_PARTITION,
            lambda rid: client_commands.end_txn_on_partition(rid, txnid.least, txnid.most, topic, action),
        )

    async def end_subscription(
        self, broker_url: str, topic: str, sub: str, txnid: TxnID, commit: bool
    ) -> None:
        action = TxnAction.COMMIT if commit else TxnAction.ABORT
        await self._call(
            broker_url,
            T.END_TXN_ON_SUBSCRIPTION,
            lambda rid: client_commands.end_txn_on_subscription(
                rid, txnid.least, txnid.most, topic, sub, action
            ),
        )

    async def _call(self, broker_url: str, kind: T, build: Callable[[int], bytes]) -> None:
        await wait_for(self.clock, self._exchange(broker_url, kind, build), REQUEST_TIMEOUT_S)

    async def _exchange(self, broker_url: str, kind: T, build: Callable[[int], bytes]) -> None:
        host, _, port = broker_url.split("://", 1)[-1].rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        conn = ClientConnection()
        try:
            writer.write(conn.connect(client_version=CLIENT_VERSION))
            rid = -1
            while True:
                data = await reader.read(READ_BYTES)
                conn.receive_data(data)
                while (event := conn.next_event()) is not None:
                    if isinstance(event, Connected):
                        rid = conn.new_request_id()
                        writer.write(conn.send_request(kind, rid, build(rid)))
                    elif isinstance(event, ConnectRejected):
                        raise _error(event.error, f"{broker_url} refused CONNECT: {event.message}")
                    elif isinstance(event, PingReceived):
                        writer.write(event.reply)
                    elif isinstance(event, ResponseReceived) and event.request_id == rid:
                        cmd = event.frame.command
                        if event.is_error:
                            raise _error(cmd.error, f"{kind.name} on {broker_url}: {cmd.message}")
                        return
                    elif isinstance(event, ConnectionClosed):
                        raise errors.ServiceNotReadyError(f"{broker_url} closed the connection")
                if not data:
                    raise errors.ServiceNotReadyError(f"{broker_url} closed the connection")
        finally:
            writer.close()


class RemoteParticipantError(errors.BrokerError):
    """The other broker's answer, with its code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.server_error = (
            ServerError(code) if code in ServerError._value2member_map_ else ServerError.UnknownError
        )


def _error(code: int, message: str) -> errors.BrokerError:
    return RemoteParticipantError(code, message)
