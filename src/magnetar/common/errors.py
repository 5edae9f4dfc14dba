"""Base errors shared by every layer.

Theory of operation: each layer defines its own typed errors (protocol,
metadata, bookie, bookkeeper, managed ledger, broker) and translates the
layer below's errors once at its boundary.  They all derive from
:class:`MagnetarError`, which carries two flags callers can act on
generically (aiokafka's shape): ``retriable`` -- the same request may succeed
later (a timeout, a lost session, a busy server) -- and ``client_error`` --
the request itself is bad and must not be retried (an invalid name or
argument).  The classes here are the ones `common` itself raises.
"""

from __future__ import annotations

from typing import ClassVar


class MagnetarError(Exception):
    """Base of every Magnetar error."""

    retriable: ClassVar[bool] = False
    client_error: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(MagnetarError, ValueError):
    """The caller passed a value that can never be valid."""

    client_error = True


class InvalidNameError(InvalidArgument):
    """A tenant, namespace, cluster or topic name breaks Pulsar's naming rules."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class InvalidTopicName(InvalidNameError):
    """A topic name could not be parsed or is not allowed."""


class InvalidNamespaceName(InvalidNameError):
    """A namespace (``tenant/ns`` or legacy ``tenant/cluster/ns``) name is malformed."""
