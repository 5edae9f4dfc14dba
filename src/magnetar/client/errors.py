"""Typed client errors, one class per Pulsar ``ServerError`` plus the client's own failures.

Theory of operation: the broker reports failures as a ``ServerError`` code in
ERROR, SEND_ERROR or a response's ``error`` field. :func:`error_from_code`
turns that code into the matching subclass of :class:`PulsarException`
(``TopicNotFound``, ``ProducerBusy``, ``IncompatibleSchema``...), named as the
official client names its ``pulsar.*`` exceptions and Pulsar names the codes,
so ``except magnetar.client.ProducerBusy`` reads the same as with Pulsar.
Failures that never came from a broker (a timeout, a closed client, a full
producer queue, a feature this client does not have) have their own classes.
``retriable`` says whether the client itself retries the operation (lookup,
reconnect) rather than handing the error to the application at once. The
base is ``common.errors.MagnetarError``, as for the admin client's
``AdminError``: the two share ``retriable`` / ``client_error`` and nothing
else (one is keyed by ServerError codes, the other by HTTP statuses).
"""

from __future__ import annotations

from magnetar.common.errors import MagnetarError
from magnetar.protocol.enums import ServerError


class PulsarException(MagnetarError):
    """Base of every error this client raises (``retriable``, ``client_error`` from MagnetarError)."""

    code: int | None = None


class Timeout(PulsarException):
    """An operation or a receive took longer than allowed."""

    retriable = True


class ConnectError(PulsarException):
    """The broker could not be reached, or the connection broke."""

    retriable = True


class AlreadyClosed(PulsarException):
    """The client, producer or consumer was closed by the application."""


class ProducerQueueIsFull(PulsarException):
    """``max_pending_messages`` reached and ``block_if_queue_full`` is off."""


class MemoryBufferIsFull(PulsarException):
    """The client's ``memory_limit_bytes`` is used up and sends do not block."""


class InvalidConfiguration(PulsarException, ValueError):
    """A bad argument: an unknown enum name, a negative size, incompatible options."""

    client_error = True


class NotSupported(PulsarException):
    """A feature this client does not implement yet (it fails loudly instead of ignoring it)."""


class MessageTooBig(PulsarException):
    """A message larger than the broker's max message size, with chunking off."""


class LookupError_(PulsarException):
    """A topic lookup failed (too many redirects, malformed answer)."""

    retriable = True


class CorruptedMessage(PulsarException):
    """A received message failed its checksum, decompression or batch parsing."""


class ServerErrorBase(PulsarException):
    """An error code sent by the broker."""


def _make(name: str, code: int, retriable: bool = False) -> type[ServerErrorBase]:
    return type(
        name, (ServerErrorBase,), {"code": code, "retriable": retriable, "__doc__": f"ServerError.{name}"}
    )


UnknownError = _make("UnknownError", ServerError.UnknownError)
MetadataError = _make("MetadataError", ServerError.MetadataError, True)
PersistenceError = _make("PersistenceError", ServerError.PersistenceError, True)
AuthenticationError = _make("AuthenticationError", ServerError.AuthenticationError)
AuthorizationError = _make("AuthorizationError", ServerError.AuthorizationError)
ConsumerBusy = _make("ConsumerBusy", ServerError.ConsumerBusy)
ServiceNotReady = _make("ServiceNotReady", ServerError.ServiceNotReady, True)
ProducerBlockedQuotaExceededError = _make(
    "ProducerBlockedQuotaExceededError", ServerError.ProducerBlockedQuotaExceededError
)
ProducerBlockedQuotaExceededException = _make(
    "ProducerBlockedQuotaExceededException", ServerError.ProducerBlockedQuotaExceededException
)
ChecksumError = _make("ChecksumError", ServerError.ChecksumError)
UnsupportedVersionError = _make("UnsupportedVersionError", ServerError.UnsupportedVersionError)
TopicNotFound = _make("TopicNotFound", ServerError.TopicNotFound)
SubscriptionNotFound = _make("SubscriptionNotFound", ServerError.SubscriptionNotFound)
ConsumerNotFound = _make("ConsumerNotFound", ServerError.ConsumerNotFound)
TooManyRequests = _make("TooManyRequests", ServerError.TooManyRequests, True)
TopicTerminated = _make("TopicTerminated", ServerError.TopicTerminatedError)
ProducerBusy = _make("ProducerBusy", ServerError.ProducerBusy)
InvalidTopicName = _make("InvalidTopicName", ServerError.InvalidTopicName)
IncompatibleSchema = _make("IncompatibleSchema", ServerError.IncompatibleSchema)
ConsumerAssignError = _make("ConsumerAssignError", ServerError.ConsumerAssignError)
TransactionCoordinatorNotFound = _make(
    "TransactionCoordinatorNotFound", ServerError.TransactionCoordinatorNotFound
)
InvalidTxnStatus = _make("InvalidTxnStatus", ServerError.InvalidTxnStatus)
NotAllowedError = _make("NotAllowedError", ServerError.NotAllowedError)
TransactionConflict = _make("TransactionConflict", ServerError.TransactionConflict)
TransactionNotFound = _make("TransactionNotFound", ServerError.TransactionNotFound)
ProducerFenced = _make("ProducerFenced", ServerError.ProducerFenced)

_BY_CODE: dict[int, type[ServerErrorBase]] = {
    cls.code: cls  # type: ignore[misc]
    for cls in ServerErrorBase.__subclasses__()
    if cls.code is not None
}


def error_from_code(code: int, message: str = "") -> PulsarException:
    """The exception for a broker's ServerError code (UnknownError for codes we do not know)."""
    cls = _BY_CODE.get(int(code), UnknownError)
    try:
        name = ServerError(code).name
    except ValueError:
        name = f"ServerError {code}"
    return cls(f"{name}: {message}" if message else name)
