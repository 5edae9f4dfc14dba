"""Transactions in the asyncio client: the coordinator client and ``Transaction``.

Theory of operation: :class:`TransactionCoordinatorClient` finds the coordinators the way
Pulsar's clients do -- the number of partitions of
``persistent://pulsar/system/transaction_coordinator_assign`` is the number of
coordinators; coordinator ``i`` lives on the broker that the lookup of partition ``i``
names; a TC_CLIENT_CONNECT_REQUEST there must succeed before NEW_TXN.  New transactions are
spread round-robin over the coordinators; later requests go to the coordinator in the
transaction id's high bits.  A request that loses its connection, or that the broker answers
ServiceNotReady / TransactionCoordinatorNotFound (the coordinator's bundle moved), is retried
(new lookup, new TC_CLIENT_CONNECT) until the operation timeout.

:class:`Transaction` (``async with client.transaction(timeout=...) as txn``):

* ``producer.send(..., txn=txn)`` first adds the partition to the transaction
  (ADD_PARTITION_TO_TXN, once per partition), then sends with the transaction id (never
  batched); the transaction remembers the send's future.
* ``consumer.acknowledge(msg, txn=txn)`` adds the subscription (ADD_SUBSCRIPTION_TO_TXN,
  once) and sends an ACK with the id and a request id, awaiting the broker's answer
  (TransactionConflict when another transaction holds the message).
* ``commit()`` waits for every send of the transaction; if one failed the transaction is
  aborted instead and the error raised.  Then END_TXN(COMMIT): when it returns, the
  messages are visible and the acks effective.  ``abort()`` sends END_TXN(ABORT).
* Leaving the ``async with`` block commits; an exception in it aborts (and propagates).

A commit whose answer is lost (connection or broker failure) has an unknown outcome: the
coordinator may have committed it.  The retry then answers TransactionNotFound, raised as
:class:`TransactionOutcomeUnknown` -- exactly-once holds either way (a committed ack is not
redelivered; an aborted one is).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import time
from collections.abc import Callable
from typing import Any

from magnetar.client.errors import (
    AlreadyClosed,
    ConnectError,
    InvalidConfiguration,
    PulsarException,
    ServiceNotReady,
    Timeout,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
)
from magnetar.protocol import client_commands
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import TxnAction

TC_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
RETRY_DELAY_S = 0.2


class TransactionOutcomeUnknown(PulsarException):
    """The end request was cut off; the coordinator no longer knows the transaction (it ended)."""


class TransactionState(enum.Enum):
    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    ERROR = "ERROR"


class TransactionCoordinatorClient:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._cnx: dict[int, Any] = {}
        self._count = 0
        self._rr = itertools.count()
        self._lock = asyncio.Lock()

    async def _coordinators(self) -> int:
        if self._count == 0:
            n = await self._client.lookup.partitions(TC_ASSIGN_TOPIC)
            if n <= 0:
                raise TransactionCoordinatorNotFound(
                    "no transaction coordinators (is transactionCoordinatorEnabled=true on the broker?)"
                )
            self._count = n
        return self._count

    async def _connection(self, tc_id: int) -> Any:
        cnx = self._cnx.get(tc_id)
        if cnx is not None and not cnx.is_closed:
            return cnx
        async with self._lock:
            cnx = self._cnx.get(tc_id)
            if cnx is not None and not cnx.is_closed:
                return cnx
            logical, physical = await self._client.lookup.lookup(f"{TC_ASSIGN_TOPIC}-partition-{tc_id}")
            cnx = await self._client.pool.get(logical, physical)
            await cnx.request(
                T.TC_CLIENT_CONNECT_REQUEST, lambda rid: client_commands.tc_client_connect_request(rid, tc_id)
            )
            self._cnx[tc_id] = cnx
            return cnx

    async def request(self, tc_id: int, kind: T, build: Callable[[int], bytes]) -> Any:
        """Send to coordinator ``tc_id``; connection losses are retried until the operation timeout."""
        deadline = time.monotonic() + self._client.pool.config.operation_timeout_s
        retried = False
        while True:
            try:
                cnx = await self._connection(tc_id)
                frame = await cnx.request(kind, build)
                return frame.command, retried
            except (
                ConnectError,
                AlreadyClosed,
                Timeout,
                OSError,
                ServiceNotReady,
                TransactionCoordinatorNotFound,
            ) as exc:  # the coordinator moved (or is moving): look it up again
                self._cnx.pop(tc_id, None)
                if time.monotonic() + RETRY_DELAY_S >= deadline:
                    raise ConnectError(f"transaction coordinator {tc_id} unreachable: {exc}") from exc
                retried = True
                await asyncio.sleep(RETRY_DELAY_S)

    async def new_txn(self, timeout_ms: int) -> tuple[int, int]:
        tc_id = next(self._rr) % await self._coordinators()
        resp, _ = await self.request(
            tc_id, T.NEW_TXN, lambda rid: client_commands.new_txn(rid, txn_ttl_ms=timeout_ms, tc_id=tc_id)
        )
        return resp.txnid_most_bits, resp.txnid_least_bits

    async def add_partition(self, txnid: tuple[int, int], topic: str) -> None:
        await self.request(
            txnid[0],
            T.ADD_PARTITION_TO_TXN,
            lambda rid: client_commands.add_partition_to_txn(rid, txnid[1], txnid[0], [topic]),
        )

    async def add_subscription(self, txnid: tuple[int, int], topic: str, subscription: str) -> None:
        await self.request(
            txnid[0],
            T.ADD_SUBSCRIPTION_TO_TXN,
            lambda rid: client_commands.add_subscription_to_txn(
                rid, txnid[1], txnid[0], [(topic, subscription)]
            ),
        )

    async def end(self, txnid: tuple[int, int], commit: bool) -> None:
        action = TxnAction.COMMIT if commit else TxnAction.ABORT
        try:
            await self.request(
                txnid[0], T.END_TXN, lambda rid: client_commands.end_txn(rid, txnid[1], txnid[0], action)
            )
        except TransactionNotFound as exc:
            raise TransactionOutcomeUnknown(f"transaction {txnid}: {exc}") from exc


class Transaction:
    def __init__(self, tc: TransactionCoordinatorClient, txn_id: tuple[int, int], timeout_ms: int) -> None:
        self._tc = tc
        self.txn_id = txn_id
        self.timeout_ms = timeout_ms
        self.state = TransactionState.OPEN
        self._registered: dict[Any, asyncio.Future[None]] = {}
        self._sends: list[asyncio.Future[Any]] = []

    def __repr__(self) -> str:
        return f"Transaction({self.txn_id[0]},{self.txn_id[1]} {self.state.value})"

    def _check_open(self) -> None:
        if self.state is not TransactionState.OPEN:
            raise InvalidConfiguration(f"transaction {self.txn_id} is {self.state.value}")

    async def _register(self, key: Any, call: Callable[[], Any]) -> None:
        self._check_open()
        fut = self._registered.get(key)
        if fut is None:
            fut = self._registered[key] = asyncio.ensure_future(call())
        try:
            await asyncio.shield(fut)
        except BaseException:
            if self._registered.get(key) is fut and fut.done():
                del self._registered[key]
            raise

    async def register_produced_topic(self, topic: str) -> None:
        await self._register(("p", topic), lambda: self._tc.add_partition(self.txn_id, topic))

    async def register_acked_topic(self, topic: str, subscription: str) -> None:
        await self._register(
            ("s", topic, subscription), lambda: self._tc.add_subscription(self.txn_id, topic, subscription)
        )

    def track_send(self, fut: asyncio.Future[Any]) -> None:
        self._sends.append(fut)

    async def commit(self) -> None:
        self._check_open()
        if self._sends:
            results = await asyncio.gather(*self._sends, return_exceptions=True)
            failed = next((r for r in results if isinstance(r, BaseException)), None)
            if failed is not None:
                await self.abort()
                raise PulsarException(
                    f"transaction {self.txn_id} aborted: a send failed: {failed}"
                ) from failed
        self.state = TransactionState.COMMITTING
        try:
            await self._tc.end(self.txn_id, True)
        except BaseException:
            self.state = TransactionState.ERROR
            raise
        self.state = TransactionState.COMMITTED

    async def abort(self) -> None:
        if self.state in (TransactionState.ABORTED, TransactionState.COMMITTED):
            return
        self.state = TransactionState.ABORTING
        if self._sends:
            await asyncio.gather(*self._sends, return_exceptions=True)
        try:
            await self._tc.end(self.txn_id, False)
        except BaseException:
            self.state = TransactionState.ERROR
            raise
        self.state = TransactionState.ABORTED


def check_transaction(txn: Any) -> None:
    if not isinstance(txn, Transaction):
        raise InvalidConfiguration(
            f"txn must be a Transaction (from client.transaction(...)), not {type(txn).__name__}"
        )


class TransactionContext:
    """``client.transaction(timeout=...)``: ``async with`` it (commit on exit, abort on error)
    or ``await`` it for a :class:`Transaction` to end by hand."""

    def __init__(self, client: Any, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise InvalidConfiguration("a transaction timeout must be positive")
        self._client = client
        self._timeout_ms = int(timeout_s * 1000)
        self.txn: Transaction | None = None

    async def _begin(self) -> Transaction:
        tc = self._client.transaction_coordinator()
        txn_id = await tc.new_txn(self._timeout_ms)
        self.txn = Transaction(tc, txn_id, self._timeout_ms)
        return self.txn

    def __await__(self) -> Any:
        return self._begin().__await__()

    async def __aenter__(self) -> Transaction:
        return await self._begin()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self.txn is not None
        if exc_type is None:
            await self.txn.commit()
            return
        try:
            await self.txn.abort()
        except PulsarException:
            pass  # the original error is what the caller needs; the coordinator times it out
