"""Transaction admin: ``/admin/v3/transactions/...`` (Pulsar's Transactions REST resource).

Theory of operation: read-only views of the broker's transaction parts, answered by
``broker.transaction.service.TransactionAdmin`` in Pulsar's JSON shapes, plus an abort.
When ``transactionCoordinatorEnabled`` is false every path answers 503 with Pulsar's
message.  Topic paths name a persistent topic as ``{tenant}/{namespace}/{topic}``;
transaction ids are ``{mostSigBits}/{leastSigBits}``.

* ``GET coordinatorStats[?coordinatorId=i]`` -- every coordinator's stats (map by id), or one.
* ``GET transactionMetadata/{most}/{least}`` -- state, partitions, subscriptions, age.
* ``GET slowTransactions/{timeout}[?coordinatorId=i]`` -- transactions open longer than
  ``timeout`` milliseconds (``1s``, ``5m`` style suffixes as the CLI accepts are also read).
* ``GET transactionBufferStats/{tenant}/{namespace}/{topic}`` and
  ``transactionInBufferStats/.../{most}/{least}``.
* ``GET pendingAckStats/{tenant}/{namespace}/{topic}/{subName}`` and
  ``transactionInPendingAckStats/.../{subName}/{most}/{least}``.
* ``POST abortTransaction/{most}/{least}`` -- abort an open transaction (204).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from magnetar.broker.transaction.model import TxnID
from magnetar.broker.transaction.service import TransactionAdmin
from magnetar.web.deps import broker
from magnetar.web.errors import WebError

router = APIRouter(prefix="/admin/v3/transactions", tags=["transactions"])

UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def _admin(request: Request) -> TransactionAdmin:
    txns = getattr(broker(request), "transactions", None)
    if txns is None:
        raise WebError(503, "This Broker is not configured with transactionCoordinatorEnabled=true.")
    return TransactionAdmin(txns)


def _topic(tenant: str, namespace: str, topic: str) -> str:
    return f"persistent://{tenant}/{namespace}/{topic}"


def _txnid(most: str, least: str) -> TxnID:
    try:
        return TxnID(int(most), int(least))
    except ValueError:
        raise WebError(400, f"Invalid transaction id {most}/{least}") from None


def duration_ms(text: str) -> int:
    text = text.strip().lower()
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * UNITS_MS[unit]
    if text.isdigit():
        return int(text)
    raise WebError(400, f"Invalid timeout {text!r}: milliseconds, or a number with ms/s/m/h")


@router.get("/coordinatorStats")
async def coordinator_stats(request: Request, coordinatorId: int | None = None) -> dict:  # noqa: N803
    return await _admin(request).coordinator_stats(coordinatorId)


@router.get("/transactionMetadata/{most}/{least}")
async def transaction_metadata(request: Request, most: str, least: str) -> dict:
    return await _admin(request).transaction_metadata(_txnid(most, least))


@router.get("/slowTransactions/{age}")
async def slow_transactions(request: Request, age: str, coordinatorId: int | None = None) -> dict:  # noqa: N803
    return await _admin(request).slow_transactions(duration_ms(age), coordinatorId)


@router.get("/transactionBufferStats/{tenant}/{namespace}/{topic}")
async def buffer_stats(request: Request, tenant: str, namespace: str, topic: str) -> dict:
    return await _admin(request).buffer_stats(_topic(tenant, namespace, topic))


@router.get("/transactionInBufferStats/{tenant}/{namespace}/{topic}/{most}/{least}")
async def in_buffer(request: Request, tenant: str, namespace: str, topic: str, most: str, least: str) -> dict:
    return await _admin(request).transaction_in_buffer(_topic(tenant, namespace, topic), _txnid(most, least))


@router.get("/pendingAckStats/{tenant}/{namespace}/{topic}/{subName}")
async def pending_ack_stats(request: Request, tenant: str, namespace: str, topic: str, subName: str) -> dict:  # noqa: N803
    return await _admin(request).pending_ack_stats(_topic(tenant, namespace, topic), subName)


@router.get("/transactionInPendingAckStats/{tenant}/{namespace}/{topic}/{subName}/{most}/{least}")
async def in_pending_ack(
    request: Request,
    tenant: str,
    namespace: str,
    topic: str,
    subName: str,  # noqa: N803
    most: str,
    least: str,
) -> dict:
    return await _admin(request).transaction_in_pending_ack(
        _topic(tenant, namespace, topic), subName, _txnid(most, least)
    )


@router.post("/abortTransaction/{most}/{least}", status_code=204)
async def abort_transaction(request: Request, most: str, least: str) -> Response:
    await _admin(request).abort(_txnid(most, least))
    return Response(status_code=204)
