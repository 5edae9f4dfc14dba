"""Transaction errors: each carries Pulsar's ServerError code (answered in the txn command's
own response) and an HTTP status for the admin REST."""

from __future__ import annotations

from magnetar.broker.errors import BrokerError, NotAllowedError
from magnetar.protocol.enums import ServerError as Code


class TransactionCoordinatorNotFoundError(BrokerError):
    server_error = Code.TransactionCoordinatorNotFound
    http_status = 404


class TransactionNotFoundError(BrokerError):
    server_error = Code.TransactionNotFound
    http_status = 404


class InvalidTxnStatusError(BrokerError):
    server_error = Code.InvalidTxnStatus
    http_status = 409


class TransactionConflictError(BrokerError):
    server_error = Code.TransactionConflict
    http_status = 409


class TransactionsDisabledError(NotAllowedError):
    def __init__(self, message: str = "Transactions are not enabled (transactionCoordinatorEnabled=false)"):
        super().__init__(message)
