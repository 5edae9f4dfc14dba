"""Broker errors, and the one place internal errors become wire codes and HTTP statuses.

Theory of operation: everything inside the broker raises a :class:`BrokerError`
subclass.  Each class carries the ``ServerError`` value the binary protocol
answers with (``server_error``) and the HTTP status the admin REST answers with
(``http_status``); the message goes out verbatim on both.  Errors raised by the
layers below (managed ledger, metadata store) are converted by :func:`translate`
at the boundary -- command handlers and HTTP handlers call it instead of
matching exception types themselves.

The ``ServerError`` numbers are Pulsar's (see the protocol reference, section 4); ``Code``
is :class:`magnetar.protocol.enums.ServerError`, not a second copy of the table.
Which codes a cpp client retries matters: TopicNotFound, ConsumerBusy,
ProducerBusy, NotAllowed, ... fail fast; ServiceNotReady, MetadataError,
PersistenceError and UnknownError are retried until the operation timeout.
"""

from __future__ import annotations

import asyncio

from magnetar.managed_ledger import api as ml
from magnetar.metadata import api as md
from magnetar.protocol.enums import ServerError as Code


class BrokerError(Exception):
    server_error: Code = Code.UnknownError
    http_status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ServiceNotReadyError(BrokerError):
    server_error = Code.ServiceNotReady
    http_status = 503


class MetadataStoreError(BrokerError):
    server_error = Code.MetadataError
    http_status = 500


class PersistenceError(BrokerError):
    server_error = Code.PersistenceError
    http_status = 500


class TopicNotFoundError(BrokerError):
    server_error = Code.TopicNotFound
    http_status = 404


class NamespaceNotFoundError(TopicNotFoundError):
    """Pulsar answers a lookup in a missing namespace with a 404, which the binary protocol
    carries as TopicNotFound (a code the client does not retry)."""


class TenantNotFoundError(TopicNotFoundError):
    pass


class ClusterNotFoundError(BrokerError):
    http_status = 404


class SubscriptionNotFoundError(BrokerError):
    server_error = Code.SubscriptionNotFound
    http_status = 404


class ConsumerNotFoundError(BrokerError):
    server_error = Code.ConsumerNotFound
    http_status = 404


class ConsumerBusyError(BrokerError):
    server_error = Code.ConsumerBusy
    http_status = 409


class ProducerBusyError(BrokerError):
    server_error = Code.ProducerBusy
    http_status = 409


class ProducerFencedError(BrokerError):
    server_error = Code.ProducerFenced
    http_status = 409


class InvalidTopicNameError(BrokerError):
    server_error = Code.InvalidTopicName
    http_status = 412


class AlreadyExistsError(BrokerError):
    server_error = Code.NotAllowedError
    http_status = 409


class InvalidPartitionCountError(BrokerError):
    server_error = Code.NotAllowedError
    http_status = 406


class PreconditionFailedError(BrokerError):
    """E.g. deleting a topic that still has producers or consumers (HTTP 412)."""

    server_error = Code.NotAllowedError
    http_status = 412


class NotAllowedError(BrokerError):
    server_error = Code.NotAllowedError
    http_status = 405


class UnprocessableError(BrokerError):
    server_error = Code.NotAllowedError
    http_status = 422


class TopicTerminatedError(BrokerError):
    server_error = Code.TopicTerminatedError
    http_status = 412


class TopicFencedError(ServiceNotReadyError):
    """The topic is closing/closed (unload, delete, fenced ledger): clients reconnect."""


class BadRequestError(BrokerError):
    """E.g. deleting a geo-replicated topic without ``force`` (HTTP 400, as Pulsar answers)."""

    server_error = Code.NotAllowedError
    http_status = 400


class ChecksumError(BrokerError):
    server_error = Code.ChecksumError
    http_status = 400


class TooManyRequestsError(BrokerError):
    server_error = Code.TooManyRequests
    http_status = 429


class IncompatibleSchemaError(BrokerError):
    server_error = Code.IncompatibleSchema
    http_status = 409


class ConsumerAssignError(BrokerError):
    server_error = Code.ConsumerAssignError
    http_status = 409


def translate(exc: BaseException) -> BrokerError:
    """Map any exception from below (or our own) to a BrokerError with a message."""
    if isinstance(exc, BrokerError):
        return exc
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ml.ManagedLedgerFencedError):
        return TopicFencedError(f"Topic is fenced: {text}")
    if isinstance(exc, ml.ManagedLedgerTerminatedError):
        return TopicTerminatedError(f"Topic was already terminated: {text}")
    if isinstance(exc, ml.ManagedLedgerClosedError | ml.CursorAlreadyClosedError):
        return TopicFencedError(f"Topic is closed: {text}")
    if isinstance(exc, ml.ManagedLedgerNotFoundError):
        return TopicNotFoundError(f"Topic not found: {text}")
    if isinstance(exc, ml.CursorNotFoundError):
        return SubscriptionNotFoundError(f"Subscription not found: {text}")
    if isinstance(exc, ml.ManagedLedgerError):
        return PersistenceError(f"Persistence error: {text}")
    if isinstance(exc, md.MetadataStoreClosed | md.SessionExpired | md.ConnectionLoss):
        return ServiceNotReadyError(f"Metadata store unavailable: {text}")
    if isinstance(exc, md.MetadataError):
        return MetadataStoreError(f"Metadata error: {text}")
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return ServiceNotReadyError(f"Operation timed out: {text}")
    return BrokerError(f"{type(exc).__name__}: {text}")
